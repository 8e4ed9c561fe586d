package resilient_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// logBuffer is a log destination safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const nodesWarning = "Options.Nodes is not set"

// TestOpenSharesInOutage opens two Limiters on one Redis with Open: the
// registry counts both, an outage gives each half of a limit, and Close
// leaves the registry and closes the store's connections.
func TestOpenSharesInOutage(t *testing.T) {
	srv := redistest.Start(t)
	prefix := fmt.Sprintf("open%x:", rand.Uint64())
	var logs logBuffer
	opts := resilient.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()
	ls := make([]*resilient.Limiter, 2)
	for i := range ls {
		l, err := resilient.Open(ctx, "redis://"+srv.Addr(), opts, redisstore.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	if n, err := srv.Do("ZCARD", prefix+"{nodes}"); err != nil || strings.TrimSpace(n) != "2" {
		t.Fatalf("registry holds %q nodes (%v), want 2", n, err)
	}
	// The first node counts the second at its next heartbeat (1 s apart).
	if !waitFor(10*time.Second, func() bool { return resilient.NodesOf(ls[0]) == 2 && resilient.NodesOf(ls[1]) == 2 }) {
		t.Fatalf("nodes counted %d and %d, want 2", resilient.NodesOf(ls[0]), resilient.NodesOf(ls[1]))
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	lim := redlimit.PerMinute(10)
	for i, l := range ls {
		admitted := 0
		for range 20 {
			res, err := l.Allow(ctx, "outage", lim)
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			if res.Allowed {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("node %d admitted %d of a limit of 10 in an outage, want its half, 5", i, admitted)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		if err := l.Close(); err != nil {
			t.Errorf("node %d: Close: %v", i, err)
		}
	}
	if n, err := srv.Do("ZCARD", prefix+"{nodes}"); err != nil || strings.TrimSpace(n) != "0" {
		t.Errorf("after Close the registry holds %q nodes (%v), want 0", n, err)
	}
	// Only the test's own connection is left once the stores are closed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := srv.Do("CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(strings.TrimSpace(list), "\n") + 1; n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d clients connected after Close, want 1 (the test's):\n%s", n, list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(logs.String(), nodesWarning) {
		t.Errorf("Open warned about Nodes:\n%s", logs.String())
	}
}

// TestNewWarnsWithoutNodes checks that New says, once, that a Limiter
// without a node count takes a whole limit in an outage.
func TestNewWarnsWithoutNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes resilient.NodeCounter
		warns int
	}{
		{"nil", nil, 1},
		{"fixed", resilient.FixedNodes(1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := memory.New()
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			var logs logBuffer
			l, err := resilient.New(store, resilient.Options{Nodes: tc.nodes, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for range 3 {
				if _, err := l.Allow(context.Background(), "k", redlimit.PerMinute(1)); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Count(logs.String(), nodesWarning); got != tc.warns {
				t.Errorf("%d warnings, want %d:\n%s", got, tc.warns, logs.String())
			}
			if tc.warns > 0 && !strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("the warning is not at level WARN:\n%s", logs.String())
			}
		})
	}
}
