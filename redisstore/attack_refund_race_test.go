package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestRefundRacingAdmissions: many goroutines Admit, AllowN and Refund
// (partially, some twice) on one key at one instant; the window algorithms
// and the sliding log end counting exactly what was admitted less what was
// given back, and a token bucket never less than that.
func TestRefundRacingAdmissions(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(5000, time.Second).FixedWindow(),
		redlimit.Per(5000, time.Second).SlidingWindow(),
		redlimit.Per(5000, time.Second).SlidingLog(),
		redlimit.Per(5000, time.Second).TokenBucket(5000),
		redlimit.Per(300, time.Second).FixedWindow(), // denials too
		redlimit.Per(300, time.Second).SlidingLog(),
	}
	for _, d := range attackDeployments() {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			clock := redlimittest.NewClock(today.Add(time.Hour))
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(prefix(t)))
			for li, l := range limits {
				key := fmt.Sprint("race", li)
				var consumed atomic.Int64
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), uint64(li)))
						for range 40 {
							cost := int64(1 + rng.IntN(20))
							if rng.IntN(4) == 0 {
								r, err := rs.AllowN(ctx, key, l, cost)
								if err != nil {
									t.Error(err)
									return
								}
								if r.Allowed {
									consumed.Add(cost)
								}
								continue
							}
							gr, err := rs.Admit(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: cost}})
							if err != nil {
								t.Error(err)
								return
							}
							if !gr.Allowed {
								continue
							}
							consumed.Add(cost)
							back := rng.Int64N(cost + 1)
							if err := rs.Refund(ctx, gr, []int64{back}); err != nil {
								t.Error(err)
								return
							}
							consumed.Add(-back)
							if err := rs.Refund(ctx, gr, []int64{cost}); err == nil {
								t.Error("a second refund of a grant succeeded")
							}
						}
					})
				}
				wg.Wait()
				r, err := rs.Peek(ctx, key, l, 1)
				if err != nil {
					t.Fatal(err)
				}
				used := l.Max() - avail(r, 1)
				if l.Algorithm == redlimit.TokenBucket {
					if used < consumed.Load() {
						t.Errorf("%s: counts %d, less than the %d admitted and not given back", l, used, consumed.Load())
					}
				} else if used != consumed.Load() {
					t.Errorf("%s: counts %d, want %d admitted less given back", l, used, consumed.Load())
				}
			}
		})
	}
}
