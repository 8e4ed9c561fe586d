package server

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

const secret = "Zq9sekret"

// Finding 14: a Redis URL that did not parse was printed with its password
// in New's error (and so in the log of `redlimit serve`). No error or log
// line holds it, whatever the URL.
func TestRedisURLErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"redis://:s3cr%et" + secret + "@127.0.0.1:1",
		"redis://default:Zq9/sekret@127.0.0.1:1",
		"redis://u:12/" + secret + "@127.0.0.1:1",
		"redis://:" + secret + "@[::1",
		"redis:" + secret + "@127.0.0.1:1",
		"redis://:" + secret + "@127.0.0.1:1",
	} {
		logs := &syncBuffer{}
		srv, err := New(context.Background(), Options{RedisURL: url, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			srv.Close() // a URL that parses: it starts, and logs why Redis is not reached
			if !strings.Contains(logs.String(), "Redis not reached") {
				t.Fatalf("%q: no error, and no log of Redis not reached:\n%s", url, logs)
			}
		}
		for _, part := range []string{secret, "Zq9", "sekret"} {
			if strings.Contains(msg, part) || strings.Contains(logs.String(), part) {
				t.Errorf("%q: the password shows: %v\n%s", url, err, logs)
			}
		}
	}
}

// Finding 14: with Options.Pprof, /debug/pprof/cmdline showed the command
// line, --redis and its password included, to whoever reached the HTTP
// address. It is not served; the other profiles are.
func TestPprofCmdlineNotServed(t *testing.T) {
	t.Parallel()
	r := start(t, Options{Pprof: true})
	code, body := r.getBody(t, "/debug/pprof/cmdline")
	if code != http.StatusNotFound || strings.Contains(body, os.Args[0]) {
		t.Fatalf("/debug/pprof/cmdline: %d %q, want 404 without the command line", code, body)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/symbol"} {
		if code := r.get(t, p); code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
	}
}

// Options.RedisURLFile names a file holding the URL (a mounted Secret), so
// that the password is on no command line. It must be a regular file (a
// FIFO would block the start for ever).
func TestRedisURLFile(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, "--requirepass", secret)
	dir := t.TempDir()
	file := filepath.Join(dir, "redis-url")
	if err := os.WriteFile(file, []byte("redis://:"+secret+"@"+redis.Addr()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, Options{RedisURLFile: file})
	if resp := r.decide(t, "ip", "1"); len(resp.Statuses) != 1 {
		t.Fatalf("decide: %v", resp)
	}
	if !strings.Contains(r.logs.String(), "redis://:xxxxx@"+redis.Addr()) || strings.Contains(r.logs.String(), secret) {
		t.Fatalf("the log shows the URL unredacted, or not at all:\n%s", r.logs)
	}

	fifo := mkfifo(t, filepath.Join(dir, "fifo"))
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"both", Options{RedisURL: "redis://" + redis.Addr(), RedisURLFile: file}, "RedisURL and RedisURLFile"},
		{"missing", Options{RedisURLFile: filepath.Join(dir, "nope")}, "nope"},
		{"empty", Options{RedisURLFile: emptyFile(t, dir)}, "empty"},
		{"a FIFO (or a directory where there are none)", Options{RedisURLFile: fifo}, "not a regular file"},
		{"a directory", Options{RedisURLFile: dir}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.GRPCAddr, o.HTTPAddr, o.Logger = "127.0.0.1:0", "127.0.0.1:0", slog.New(slog.DiscardHandler)
			done := make(chan error, 1)
			go func() {
				srv, err := New(context.Background(), o)
				if err == nil {
					srv.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one naming %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("New did not return")
			}
		})
	}
}

func emptyFile(t *testing.T, dir string) string {
	path := filepath.Join(dir, "empty")
	writeFile(t, path, " \n")
	return path
}
