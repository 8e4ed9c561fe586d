package tlsreload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// TestWatchSwappedLink: the files' directory is a link to a directory
// swapped atomically, as a release switch does (ln -sfn new tmp && mv -T
// tmp current); every swap is served, before and after a Reload (SIGHUP).
func TestWatchSwappedLink(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	current := filepath.Join(dir, "current")
	release := func(n int) *tlstest.Leaf {
		t.Helper()
		leaf := ca.Server(t, fmt.Sprint("release", n))
		d := filepath.Join(dir, fmt.Sprint("release", n))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.PEM} {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tmp := current + ".tmp"
		if err := os.Symlink(filepath.Base(d), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, current); err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	release(1)
	r, err := New(Files{Cert: filepath.Join(current, "tls.crt"), Key: filepath.Join(current, "tls.key"), ClientCA: filepath.Join(current, "ca.crt")},
		Options{Logger: quiet(), Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.TLSConfig(Listener{})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done, err := r.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	client := tlstest.ClientConfig(ca, nil)
	for n := 2; n <= 7; n++ {
		if n == 5 {
			if err := r.Reload(); err != nil { // as SIGHUP does
				t.Fatal(err)
			}
		}
		leaf := release(n)
		waitFor(t, fmt.Sprintf("the certificate of swap %d", n-1), func() bool {
			sn, err := s.dial(client)
			return err == nil && sn == leaf.Cert.SerialNumber.String()
		})
	}
}
