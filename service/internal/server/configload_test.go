package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/config"
)

// blockingLoader returns a loader that loads as the config package does,
// except while block is set: then it waits for release, whatever its
// context says, as a read of a hung file system would.
func blockingLoader(block *atomic.Bool, release <-chan struct{}) func(context.Context, config.Loader, string) (*config.Config, error) {
	return func(ctx context.Context, l config.Loader, path string) (*config.Config, error) {
		if block.Load() {
			<-release
		}
		return l.Load(ctx, path)
	}
}

// A load that does not return cannot keep New from returning once its
// context is done (SIGTERM during start-up), nor Run from shutting down
// (a reload by the watcher or by SIGHUP in progress).
func TestLoadCannotBlockShutdown(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1))
	release := make(chan struct{})
	defer close(release)
	var block atomic.Bool
	block.Store(true)

	// Start-up.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		srv, err := New(ctx, Options{ConfigPath: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Logger: slog.New(slog.DiscardHandler), loadConfig: blockingLoader(&block, release)})
		if err == nil {
			srv.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("New: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("New still loading 10s after its context was canceled")
	}

	// Reloads while running.
	block.Store(false)
	r := start(t, Options{ConfigPath: path, loadConfig: blockingLoader(&block, release)})
	block.Store(true)
	reloaded := make(chan error, 1)
	go func() { reloaded <- r.Reload() }()       // as SIGHUP does
	writeFile(t, path, fmt.Sprintf(ruleFile, 2)) // and the watcher
	time.Sleep(100 * time.Millisecond)           // past the debounce
	r.stop(t)                                    // fails the test if Run does not return
	select {
	case err := <-reloaded:
		if err == nil || !strings.Contains(err.Error(), "shutting down") {
			t.Errorf("Reload: got %v, want an error saying the server is shutting down", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reload still loading 10s after the shutdown")
	}
}
