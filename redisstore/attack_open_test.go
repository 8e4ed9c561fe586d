package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/redisstore"
)

// TestOpenHostileURLs: malformed or hostile URLs give an error wrapping
// ErrConnect, quickly, without a panic.
func TestOpenHostileURLs(t *testing.T) {
	t.Parallel()
	urls := []string{
		"",
		"redis://",
		"redis://:",
		"redis://:0",
		"redis://127.0.0.1:99999",
		"redis://127.0.0.1:-1",
		"redis://127.0.0.1:abc",
		"redis://127.0.0.1:1",
		"redis://[::1]:1",
		"redis://[::1",
		"redis://[zz]:6379",
		"redis://127.0.0.1:1/notadb",
		"redis://127.0.0.1:1/-1",
		"redis://127.0.0.1:1/99999999999999999999",
		"redis://127.0.0.1:1?" + strings.Repeat("a=b&", 100000),
		"redis://127.0.0.1:1?unknown=1",
		"redis://127.0.0.1:1?dial_timeout=forever",
		"redis://127.0.0.1:1?dial_timeout=-1s",
		"redis://127.0.0.1:1?write_timeout=x",
		"redis://127.0.0.1:1?protocol=9",
		"redis://127.0.0.1:1?addr=",
		"redis://127.0.0.1:1?addr=%zz",
		"redis://127.0.0.1:1?master_set=",
		"redis://127.0.0.1:1?ca_file=/nonexistent",
		"rediss://127.0.0.1:1?ca_file=/nonexistent",
		"rediss://127.0.0.1:1?ca_file=/etc/hostname",
		"rediss://127.0.0.1:1?ca_file=",
		"rediss://127.0.0.1:1?skip_verify=maybe",
		"rediss://127.0.0.1:1?skip_verify=true&ca_file=/nonexistent",
		"http://127.0.0.1:1",
		"unix:///nonexistent.sock",
		"redis:127.0.0.1:1",
		"redis://u:p@ss@127.0.0.1:1",
		"redis://u:%zz@127.0.0.1:1",
		"redis://127.0.0.1:1#frag",
		"redis://127.0.0.1:1/0/1",
		"redis://\x00:1",
		"redis://127.0.0.1:1?client_name=a%0Db",
		"redis://127.0.0.1:1?max_retries=-5",
		"redis://" + strings.Repeat("a", 10000) + ":1",
	}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%.80q: panic %v", u, p)
				}
			}()
			s, err := redisstore.Open(ctx, u)
			if err == nil {
				s.Close()
				t.Errorf("%.80q: opened", u)
				return
			}
			if !errors.Is(err, redisstore.ErrConnect) {
				t.Errorf("%.80q: %.300v, not wrapping ErrConnect", u, err)
			}
			t.Logf("%.60q: %.200v", u, err)
		}()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%.80q: took %s", u, d)
		}
		cancel()
	}
}
