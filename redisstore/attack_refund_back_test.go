package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
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

// TestRefundClockBackDifferential: random Admits, full and partial
// Refunds, debits and AllowN on the window algorithms, with a clock that
// often steps back by up to three windows, on the memory store and on
// Redis at the same instants: every answer must agree (the retired
// windows a full refund brings back, and refunds of requests counted in
// them).
func TestRefundClockBackDifferential(t *testing.T) {
	ctx := context.Background()
	limits := []redlimit.Limit{
		redlimit.Per(6, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(6, 100*time.Millisecond).SlidingWindow(),
	}
	clock := redlimittest.NewClock(today)
	rs := standalone[0].store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(24*time.Hour), redisstore.WithPrefix(prefix(t)))
	for seed := range uint64(200) {
		mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 25))
		type pair struct{ m, r *redlimit.Grant }
		var grants []pair
		var hist []string
		for step := range 80 {
			d := time.Duration(rng.Int64N(60_000)) * time.Microsecond
			if rng.IntN(4) == 0 {
				d = -time.Duration(rng.Int64N(300_000)) * time.Microsecond
			}
			clock.Advance(d)
			l := limits[rng.IntN(len(limits))]
			key := fmt.Sprintf("s%d/%d", seed, rng.IntN(2))
			req := redlimit.Request{Key: key, Limit: l, Cost: int64(1 + rng.IntN(3))}
			var got, want string
			switch op := rng.IntN(10); {
			case op < 4:
				gm, e1 := mem.Admit(ctx, []redlimit.Request{req})
				gr, e2 := rs.Admit(ctx, []redlimit.Request{req})
				if e1 != nil || e2 != nil {
					t.Fatalf("seed %d step %d: admit: %v, %v", seed, step, e1, e2)
				}
				got, want = fmt.Sprintf("admit %+v", gr.Results), fmt.Sprintf("admit %+v", gm.Results)
				grants = append(grants, pair{gm, gr})
			case op < 7 && len(grants) > 0:
				i := rng.IntN(len(grants))
				g := grants[i]
				grants = append(grants[:i], grants[i+1:]...)
				back := g.m.Requests[0].Cost
				if rng.IntN(3) == 0 {
					back = rng.Int64N(back + 1)
				}
				e1 := mem.Refund(ctx, g.m, []int64{back})
				e2 := rs.Refund(ctx, g.r, []int64{back})
				got, want = fmt.Sprintf("refund %s %d: %v", g.m.Requests[0].Key, back, e2), fmt.Sprintf("refund %s %d: %v", g.m.Requests[0].Key, back, e1)
			case op < 8:
				req.Debit = true
				dm, e1 := mem.AllowAll(ctx, []redlimit.Request{req})
				dr, e2 := rs.AllowAll(ctx, []redlimit.Request{req})
				if e1 != nil || e2 != nil {
					t.Fatalf("seed %d step %d: debit: %v, %v", seed, step, e1, e2)
				}
				got, want = fmt.Sprintf("debit %+v", dr.Results), fmt.Sprintf("debit %+v", dm.Results)
			default:
				rm, e1 := mem.AllowN(ctx, key, l, req.Cost)
				rr, e2 := rs.AllowN(ctx, key, l, req.Cost)
				if e1 != nil || e2 != nil {
					t.Fatalf("seed %d step %d: allow: %v, %v", seed, step, e1, e2)
				}
				got, want = fmt.Sprintf("allow %+v", rr), fmt.Sprintf("allow %+v", rm)
			}
			hist = append(hist, fmt.Sprintf("%d %s %s cost %d: %s", clock.Now().UnixMicro()%1_000_000, key, l.Algorithm, req.Cost, want))
			if got != want {
				t.Fatalf("seed %d step %d: redis %s, memory %s\nhistory:\n%s", seed, step, got, want, strings.Join(hist, "\n"))
			}
		}
		mem.Close()
	}
}
