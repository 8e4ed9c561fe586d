package tlsreload

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// server is a TLS listener whose connections write "ok" once their
// handshake is done.
type server struct {
	addr string
}

func serve(t *testing.T, cfg *tls.Config) *server {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("ok"))
				}
			})
		}
	})
	return &server{addr: ln.Addr().String()}
}

// dial shakes hands with the server as cfg says, and returns the serial
// number of the server's certificate, or the error of the handshake or of
// the read that follows it (in TLS 1.3 the server refuses a client's
// certificate after the client's side of the handshake is done).
func (s *server) dial(cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// loads records what Options.Loaded is told.
type loads struct {
	mu   sync.Mutex
	errs []error
}

func (l *loads) loaded(_ time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *loads) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, err := range l.errs {
		if err != nil {
			n++
		}
	}
	return n
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestLoadRefusesBrokenFiles(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	good, other := ca.Server(t, "good"), ca.Server(t, "other")
	expired := ca.Issue(t, tlstest.Template{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := write("good.crt", good.CertPEM), write("good.key", good.KeyPEM)
	caFile := write("ca.pem", ca.PEM)
	chain := append(append([]byte{}, good.CertPEM...), ca.PEM...)
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"no key", Files{Cert: cert}, "both"},
		{"missing", Files{Cert: filepath.Join(dir, "nope.crt"), Key: key}, "no such file"},
		{"directory", Files{Cert: dir, Key: key}, "not a regular file"},
		{"not PEM", Files{Cert: write("junk.crt", []byte("hello")), Key: key}, "no PEM block"},
		{"key of another", Files{Cert: cert, Key: write("other.key", other.KeyPEM)}, "does not match"},
		{"chain cut short", Files{Cert: write("cut.crt", chain[:len(chain)-40]), Key: key}, "not a whole PEM block"},
		{"expired", Files{Cert: write("old.crt", expired.CertPEM), Key: write("old.key", expired.KeyPEM)}, "expired"},
		{"CA file of a key", Files{Cert: cert, Key: key, ClientCA: key}, `"PRIVATE KEY" block`},
		{"CA file empty", Files{Cert: cert, Key: key, ClientCA: write("empty.pem", nil)}, "no PEM block"},
	} {
		_, err := New(tc.files, Options{Logger: quiet()})
		if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrFile, %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "BEGIN") {
			t.Errorf("%s: the error shows the file's content: %v", tc.name, err)
		}
	}
	if _, err := New(Files{Cert: cert, Key: key, ClientCA: caFile}, Options{Logger: quiet()}); err != nil {
		t.Fatalf("good files: %v", err)
	}
	if _, err := New(Files{Cert: write("chain.crt", chain), Key: key}, Options{Logger: quiet()}); err != nil {
		t.Fatalf("a certificate with its chain: %v", err)
	}
}

// TestReloadKeepsServingOnBrokenFiles: files that do not load leave the
// certificate in use serving; good ones replace it for the next handshake.
func TestReloadKeepsServingOnBrokenFiles(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	cert, key := first.Write(t, dir, "tls")
	var got loads
	r, err := New(Files{Cert: cert, Key: key}, Options{Logger: quiet(), Loaded: got.loaded})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.TLSConfig(Listener{})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, cfg)
	client := tlstest.ClientConfig(ca, nil)
	if sn, err := s.dial(client); err != nil || sn != first.Cert.SerialNumber.String() {
		t.Fatalf("first: %s, %v", sn, err)
	}
	// The new certificate with the old key: refused, the first still serves.
	tlstest.WriteFile(t, cert, second.CertPEM)
	if err := r.Reload(); !errors.Is(err, ErrFile) {
		t.Fatalf("a certificate without its key: %v", err)
	}
	if sn, err := s.dial(client); err != nil || sn != first.Cert.SerialNumber.String() {
		t.Fatalf("after a broken reload: %s, %v; want the first certificate", sn, err)
	}
	if got.failures() != 1 {
		t.Fatalf("failures reported: %d, want 1", got.failures())
	}
	tlstest.WriteFile(t, key, second.KeyPEM)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if sn, err := s.dial(client); err != nil || sn != second.Cert.SerialNumber.String() {
		t.Fatalf("after the reload: %s, %v; want the second certificate", sn, err)
	}
	if !r.NotAfter().Equal(second.Cert.NotAfter) {
		t.Fatalf("NotAfter %s, want %s", r.NotAfter(), second.Cert.NotAfter)
	}
	// Files unchanged: nothing reported.
	n := len(got.errs)
	if err := r.Reload(); err != nil || len(got.errs) != n {
		t.Fatalf("a reload of the same files: %v, %d reports, want %d", err, len(got.errs), n)
	}
}

// TestClientAuth: with ClientAuth, a client without a certificate and one
// whose certificate another CA signed are refused; the CA file is
// reloaded like the certificate.
func TestClientAuth(t *testing.T) {
	t.Parallel()
	ca, rogue := tlstest.NewCA(t, "test CA"), tlstest.NewCA(t, "rogue CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	r, err := New(Files{Cert: cert, Key: key, ClientCA: caFile}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.TLSConfig(Listener{ClientAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, cfg)
	ours, theirs := ca.Client(t, "envoy"), rogue.Client(t, "intruder")
	if _, err := s.dial(tlstest.ClientConfig(ca, ours)); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	if _, err := s.dial(tlstest.ClientConfig(ca, nil)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := s.dial(tlstest.ClientConfig(ca, theirs)); err == nil {
		t.Fatal("a client of another CA was served")
	}
	// The CA file now names the other CA.
	tlstest.WriteFile(t, caFile, rogue.PEM)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.dial(tlstest.ClientConfig(ca, theirs)); err != nil {
		t.Fatalf("a client of the new CA: %v", err)
	}
	if _, err := s.dial(tlstest.ClientConfig(ca, ours)); err == nil {
		t.Fatal("a client of the old CA was served after the CA changed")
	}
	// A listener may not ask for client certificates without a CA file.
	r2, err := New(Files{Cert: cert, Key: key}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.TLSConfig(Listener{ClientAuth: true}); !errors.Is(err, ErrFile) {
		t.Fatalf("ClientAuth without a CA file: %v", err)
	}
}

// secretDir lays out files as Kubernetes mounts a Secret: each name a link
// into ..data, itself a link to a directory of the files, swapped at each
// update by renaming a new link over it.
type secretDir struct {
	t   *testing.T
	dir string
	n   int
}

func (s *secretDir) update(files map[string][]byte) {
	s.t.Helper()
	s.n++
	gen := filepath.Join(s.dir, "..gen"+strings.Repeat("x", s.n))
	if err := os.Mkdir(gen, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(gen, name), data, 0o600); err != nil {
			s.t.Fatal(err)
		}
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

// TestWatchSecretUpdates: a certificate updated as Kubernetes updates a
// mounted Secret is served without a reload asked; a broken update leaves
// the last good one serving.
func TestWatchSecretUpdates(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	sec := &secretDir{t: t, dir: t.TempDir()}
	sec.update(map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
	var got loads
	r, err := New(Files{Cert: filepath.Join(sec.dir, "tls.crt"), Key: filepath.Join(sec.dir, "tls.key")},
		Options{Logger: quiet(), Loaded: got.loaded, Debounce: 20 * time.Millisecond})
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
	serving := func(want *tlstest.Leaf) bool {
		sn, err := s.dial(client)
		return err == nil && sn == want.Cert.SerialNumber.String()
	}
	sec.update(map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM})
	waitFor(t, "the second certificate", func() bool { return serving(second) })
	// A broken update: the key of the first with a certificate of no key.
	sec.update(map[string][]byte{"tls.crt": first.CertPEM, "tls.key": second.KeyPEM})
	waitFor(t, "the broken update reported", func() bool { return got.failures() > 0 })
	if !serving(second) {
		t.Fatal("a broken update replaced the certificate in use")
	}
	sec.update(map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
	waitFor(t, "the first certificate again", func() bool { return serving(first) })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
