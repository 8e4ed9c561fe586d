//go:build unix

package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A named pipe as the configuration is refused at once, at start-up and on
// a reload, rather than waited on for a writer that never comes (which
// kept the process from shutting down on SIGTERM).
func TestConfigNamedPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		srv, err := New(context.Background(), Options{ConfigPath: fifo, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			srv.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("New: got %v, want not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("New still loading a named pipe after 10s")
	}

	// A directory that gets a named pipe: the reload fails, counted, and
	// the server shuts down when asked.
	rules := t.TempDir()
	writeFile(t, filepath.Join(rules, "web.yaml"), fmt.Sprintf(ruleFile, 1))
	r := start(t, Options{ConfigPath: rules})
	fails := r.metric(t, `redlimit_config_reloads_total{result="failure"}`)
	if err := syscall.Mkfifo(filepath.Join(rules, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed reload counted", func() bool {
		return r.metric(t, `redlimit_config_reloads_total{result="failure"}`) > fails
	})
	if got := r.decide(t, "ip", "1").Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 1 {
		t.Errorf("limit %d, want the previous configuration's 1", got)
	}
}
