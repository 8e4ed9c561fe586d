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

// TestFullRefundThenClockBack: a request that made a new latest window,
// refunded in full (Admit, then Refund of its whole cost), then a request
// at an instant back in an earlier window. A full refund leaves the key as
// if the request never came (lua/windows.lua: "a refund that empties the
// latest window deletes it and brings [the retired windows] back, so the
// key is as if the request never came"; memory/algorithms.go is the
// specification the scripts follow), so the request after the step back
// is decided as in a replay without the refunded request, on both stores.
//
// Sliding window, W = 100 ms, 10 per period: window 1 admits 10; window 3
// admits 1, refunded in full; the clock steps back to the middle of window
// 2, where window 1 still weighs 5 of its 10, and a request of 6 does not
// fit. Fixed window: window 1 admits 10; window 2 admits 1, refunded in
// full; back in window 1, a request of 1 does not fit.
func TestFullRefundThenClockBack(t *testing.T) {
	ctx := context.Background()
	const W = int64(100_000) // µs
	base := (today.UnixMicro()/W + 1) * W
	at := func(us int64) time.Time { return time.UnixMicro(base + us) }
	for _, tc := range []struct {
		name     string
		limit    redlimit.Limit
		refundAt int64 // µs after window 1's start
		backAt   int64
		cost     int64
	}{
		{"sliding", redlimit.Per(10, 100*time.Millisecond).SlidingWindow(), 2*W + W/10, W + W/2, 6},
		{"fixed", redlimit.Per(10, 100*time.Millisecond).FixedWindow(), W + W/10, W / 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := redlimittest.NewClock(at(0))
			mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			rs := standalone[0].store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(24*time.Hour), redisstore.WithPrefix(prefix(t)))
			stores := []struct {
				name string
				s    redlimit.Refunder
			}{{"memory", mem}, {"redis", rs}}
			// run plays the scenario on key, with the refunded request or
			// without it, and returns the decision after the step back.
			run := func(s redlimit.Refunder, key string, refunded bool) redlimit.Result {
				t.Helper()
				clock.Set(at(W / 10))
				if r, err := s.AllowN(ctx, key, tc.limit, 10); err != nil || !r.Allowed {
					t.Fatalf("%s: window 1's 10: %+v, %v", key, r, err)
				}
				if refunded {
					clock.Set(at(tc.refundAt))
					req := []redlimit.Request{{Key: key, Limit: tc.limit, Cost: 1}}
					g, err := s.Admit(ctx, req)
					if err != nil || !g.Allowed {
						t.Fatalf("%s: the request to refund: %+v, %v", key, g, err)
					}
					if err := s.Refund(ctx, g, []int64{1}); err != nil {
						t.Fatalf("%s: refund: %v", key, err)
					}
				}
				clock.Set(at(tc.backAt))
				r, err := s.AllowN(ctx, key, tc.limit, tc.cost)
				if err != nil {
					t.Fatalf("%s: after the step back: %v", key, err)
				}
				return r
			}
			for _, st := range stores {
				replay := run(st.s, "replay", false)
				got := run(st.s, "refunded", true)
				if replay.Allowed {
					t.Fatalf("%s: the replay without the refunded request admits %d: %+v", st.name, tc.cost, replay)
				}
				if got != replay {
					t.Errorf("%s: after a full refund and the clock back:\n got    %+v\n replay %+v (the refunded request never came)", st.name, got, replay)
				}
			}
		})
	}
}
