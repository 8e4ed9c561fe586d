package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// TestFailedResetKeepsLocalState: a Reset that Redis did not make (Redis
// killed) returns its error and leaves this node's state as it was: a key
// exhausted (on Redis before the outage, or by the node's share during
// it) stays exhausted, and is not given a fresh share.
func TestFailedResetKeepsLocalState(t *testing.T) {
	t.Parallel()
	lim := redlimit.PerHour(4).SlidingLog()
	for _, c := range []struct {
		name    string
		exhaust func(t *testing.T, l *resilient.Limiter, srv *redistest.Server, key string)
	}{
		{"on Redis", func(t *testing.T, l *resilient.Limiter, srv *redistest.Server, key string) {
			for i := range 5 {
				if r, err := l.Allow(context.Background(), key, lim); err != nil || r.Allowed != (i < 4) || r.Source != redlimit.FromStore {
					t.Fatalf("request %d of 4: %+v, %v", i+1, r, err)
				}
			}
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
		}},
		{"by the share", func(t *testing.T, l *resilient.Limiter, srv *redistest.Server, key string) {
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			admitLocally(t, l, key, lim, 2) // the share of 4 on 2 nodes
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := redistest.Start(t)
			l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{
				Nodes: fixedNodes(2), Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: 20 * time.Millisecond}, Timeout: time.Second,
			})
			key := fmt.Sprint("k", rand.Uint64())
			c.exhaust(t, l, srv, key)
			if err := l.Reset(ctx, key, lim); !errors.Is(err, resilient.ErrStore) {
				t.Fatalf("Reset with Redis killed: %v, want an error wrapping ErrStore", err)
			}
			for i := range 4 {
				r, err := l.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					t.Errorf("request %d after the failed Reset admitted: %+v", i+1, r)
				}
			}
		})
	}
}
