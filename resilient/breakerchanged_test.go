package resilient_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestBreakerChangedCause: Options.BreakerChanged is told each change of
// the breaker, with the store's error that opened it.
func TestBreakerChangedCause(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	var down atomic.Bool
	type change struct {
		from, to string
		cause    error
	}
	var mu sync.Mutex
	var got []change
	opts := resilientOpts()
	opts.BreakerChanged = func(from, to string, cause error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, change{from, to, cause})
	}
	l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down}, opts)
	ctx := context.Background()
	limit := redlimit.PerSecond(100)
	down.Store(true)
	l.Allow(ctx, "breaker-cause", limit)
	down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for l.BreakerState() != "closed" || len(snapshot(&mu, &got)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %s, changes %v", l.BreakerState(), snapshot(&mu, &got))
		}
		l.Allow(ctx, "breaker-cause", limit)
		time.Sleep(5 * time.Millisecond)
	}
	changes := snapshot(&mu, &got)
	if c := changes[0]; c.from != "closed" || c.to != "open" || !errors.Is(c.cause, errDown) {
		t.Fatalf("first change %v, want closed to open caused by %v", c, errDown)
	}
	for _, c := range changes[1:] {
		if c.to != "open" && c.cause != nil {
			t.Errorf("change %v has a cause", c)
		}
	}
}

func snapshot[T any](mu *sync.Mutex, s *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	return append([]T(nil), *s...)
}
