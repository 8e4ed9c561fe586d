package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestDebtOutlivesAPeriodWhileTheStateHasNotDrained: units admitted
// locally whose last is a period old are dropped as expired
// ("every window has drained them by then", docs/RELIABILITY.md), but a
// sliding window still weighs the previous window's count for up to a
// second period, and a token bucket whose burst is above its count takes
// burst/count periods to refill. One node, whose clock and Redis's are the
// test's: the node admits the whole limit locally, the store is back a
// period and a minute later, and then admits it again, where the limit,
// had Redis counted the outage's admissions, would admit (about) nothing.
func TestDebtOutlivesAPeriodWhileTheStateHasNotDrained(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for _, c := range []struct {
		name  string
		lim   redlimit.Limit
		local int // admitted locally at the start
		want  int // the most the limit admits a period and a minute later, had Redis counted them
	}{
		// 10 at a minute into a window; two minutes into the next one
		// the previous window weighs 58/60 of 10: 10 (rounded up).
		{"sliding window", redlimit.PerHour(10), 10, 0},
		// 100 tokens taken, 10 an hour back: about 10 after 61 minutes.
		{"token bucket", redlimit.PerHour(10).TokenBucket(100), 100, 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			// A minute into an hour's window.
			base := time.Now().Truncate(time.Hour).Add(-24 * time.Hour).Add(time.Minute).Round(0)
			var offset atomic.Int64
			now := func() time.Time { return base.Add(time.Duration(offset.Load())) }
			var down atomic.Bool
			store := downStore{redisStore(t, []string{srv.Addr()}, redisstore.WithClock(now), redisstore.WithTTLMargin(3*time.Hour)), &down}
			l := newLimiter(t, store, resilient.Options{Now: now, Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: time.Millisecond}, Fallback: resilient.FallbackOptions{LastSeenSize: -1}, Reconcile: resilient.ReconcileOptions{Spread: -1}, Timeout: time.Second})
			key := fmt.Sprint("k", rand.Uint64())
			down.Store(true)
			admitLocally(t, l, key, c.lim, c.local)
			offset.Store(int64(c.lim.Period + time.Minute))
			down.Store(false)
			backOnStore(t, l)
			waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 })
			admitted := 0
			for range 2 * c.local {
				r, err := l.Allow(ctx, key, c.lim)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			}
			if admitted > c.want {
				t.Errorf("%v: %d admitted locally, then %d by Redis a period and a minute later, want at most %d; reconciliation %+v",
					c.lim, c.local, admitted, c.want, l.Reconciliation())
			}
		})
	}
}
