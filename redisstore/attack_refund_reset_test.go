package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestRefundAcrossResetWithClockBehind shows that a refund never crosses
// a reset, whatever the clocks, and that both stores agree, for every
// algorithm, on one server and on a Cluster:
//   - behind: 6 admitted, a reset on a clock 5 ms behind, 6 admitted
//     again, then the first 6 refunded: the refund gives nothing back,
//     since the reset did, and the next request is denied;
//   - back: a reset, the clock steps 5 ms back, 5 admitted and 4 of
//     them refunded: the 4 come back, as the admission followed the reset.
func TestRefundAcrossResetWithClockBehind(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(6, time.Minute).FixedWindow(),
		redlimit.Per(6, time.Minute).SlidingWindow(),
		redlimit.Per(6, time.Minute).SlidingLog(),
		redlimit.Per(6, time.Minute).TokenBucket(6),
	}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			clock := redlimittest.NewClock(today.Add(30 * time.Second))
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(24*time.Hour), redisstore.WithPrefix(prefix(t)))
			mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			stores := []struct {
				name string
				s    interface {
					redlimit.Limiter
					redlimit.Refunder
				}
			}{{"memory", mem}, {"redis", rs}}
			for _, l := range limits {
				for _, s := range stores {
					start := clock.Now()
					key := "behind/" + l.String()
					g, err := s.s.Admit(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 6}})
					if err != nil || !g.Allowed {
						t.Fatalf("%s %s: admit 6: %+v, %v", s.name, l, g, err)
					}
					clock.Advance(-5 * time.Millisecond)
					if err := s.s.Reset(ctx, key, l); err != nil {
						t.Fatal(err)
					}
					clock.Set(start.Add(time.Millisecond))
					if r, err := s.s.AllowN(ctx, key, l, 6); err != nil || !r.Allowed {
						t.Fatalf("%s %s: 6 after the reset: %+v, %v", s.name, l, r, err)
					}
					if err := s.s.Refund(ctx, g, []int64{6}); err != nil {
						t.Fatal(err)
					}
					if r, err := s.s.AllowN(ctx, key, l, 1); err != nil || r.Allowed {
						t.Errorf("%s %s behind: a 13th in a window of 6: %+v, %v; want denied", s.name, l, r, err)
					}

					key = "back/" + l.String()
					if err := s.s.Reset(ctx, key, l); err != nil {
						t.Fatal(err)
					}
					clock.Advance(-5 * time.Millisecond)
					g, err = s.s.Admit(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 5}})
					if err != nil || !g.Allowed {
						t.Fatalf("%s %s: admit 5: %+v, %v", s.name, l, g, err)
					}
					if err := s.s.Refund(ctx, g, []int64{4}); err != nil {
						t.Fatal(err)
					}
					if r, err := s.s.Peek(ctx, key, l, 5); err != nil || !r.Allowed {
						t.Errorf("%s %s back: 5 after 5 admitted and 4 refunded: %+v, %v; want allowed", s.name, l, r, err)
					}
					clock.Set(start.Add(10 * time.Millisecond))
				}
			}
		})
	}
}
