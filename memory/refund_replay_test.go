package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// refundStep is one step of a random refund sequence on one key.
type refundStep struct {
	kind  string // "clock", "admit", "debit", "refund", "peek", "reset", "nop"
	dt    time.Duration
	lim   redlimit.Limit
	cost  int64
	grant int   // refund: the index of the admit step
	back  int64 // refund: units given back
	// results of the original run
	allowed bool
	res     redlimit.Result
}

// TestRefundNeverMoreLenientThanReplay: random sequences of Admits, Refunds,
// Peeks, debits, Resets, limit changes and clock steps (forward, to
// boundaries and back) on one key, for each algorithm, compared with a replay on a fresh
// store in which each refunded admission costs Cost - back from the start
// (the exact account, Refunder.Refund): every admission the store allowed
// the replay allows too, and every Peek the store allows the replay allows,
// with at least as much Remaining and no shorter a RetryAfter. Refunds give
// back less than the whole cost: a request refunded in full still made its
// window the key's latest, which the replay cannot do without it (see the
// clock-back rules in the package redlimit documentation).
func TestRefundNeverMoreLenientThanReplay(t *testing.T) {
	ctx := context.Background()
	algs := []func(redlimit.Limit, int64) redlimit.Limit{
		func(l redlimit.Limit, _ int64) redlimit.Limit { return l.FixedWindow() },
		func(l redlimit.Limit, _ int64) redlimit.Limit { return l.SlidingWindow() },
		func(l redlimit.Limit, _ int64) redlimit.Limit { return l.SlidingLog() },
		func(l redlimit.Limit, b int64) redlimit.Limit { return l.TokenBucket(b) },
	}
	seeds := 4000 // 200,000 pass too

	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		mk := algs[seed%len(algs)]
		period := []time.Duration{time.Second, 100 * time.Millisecond, 7 * time.Millisecond}[rng.IntN(3)]
		newLim := func() redlimit.Limit {
			return mk(redlimit.Per(1+rng.Int64N(8), period), 1+rng.Int64N(8))
		}
		lim := newLim()
		clockBack := rng.IntN(2) == 0
		debits := seed%8 < 4
		var steps []refundStep
		for range 80 {
			switch k := rng.IntN(20); {
			case k < 5:
				var dt time.Duration
				switch rng.IntN(4) {
				case 0:
					dt = time.Duration(rng.Int64N(int64(period)/time.Microsecond.Nanoseconds()+1)) * time.Microsecond
				case 1:
					dt = time.Duration(rng.Int64N(20)) * time.Microsecond
				case 2:
					dt = period
				case 3:
					if clockBack {
						dt = -time.Duration(rng.Int64N(int64(period)/time.Microsecond.Nanoseconds()+1)) * time.Microsecond
					} else {
						dt = period / 2
					}
				}
				steps = append(steps, refundStep{kind: "clock", dt: dt})
			case k < 6:
				lim = newLim()
			case k < 11:
				steps = append(steps, refundStep{kind: "admit", lim: lim, cost: 1 + rng.Int64N(lim.Max())})
			case k < 16:
				steps = append(steps, refundStep{kind: "refund", grant: -1})
			case k < 17 && debits:
				steps = append(steps, refundStep{kind: "debit", lim: lim, cost: 1 + rng.Int64N(2*lim.Max())})
			case k < 19:
				steps = append(steps, refundStep{kind: "peek", lim: lim, cost: 1 + rng.Int64N(lim.Max())})
			default:
				steps = append(steps, refundStep{kind: "reset", lim: lim})
			}
		}

		// The original run.
		clock := redlimittest.NewClock(redlimittest.T0)
		s, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		grants := map[int]*redlimit.Grant{}
		for i := range steps {
			st := &steps[i]
			switch st.kind {
			case "clock":
				clock.Advance(st.dt)
			case "admit":
				g, err := s.Admit(ctx, []redlimit.Request{{Key: "k", Limit: st.lim, Cost: st.cost}})
				if err != nil {
					t.Fatal(err)
				}
				st.allowed, st.res = g.Allowed, g.Results[0]
				if g.Allowed {
					grants[i] = g
				}
			case "refund":
				var open []int
				for j := range i {
					if grants[j] != nil {
						open = append(open, j)
					}
				}
				if len(open) == 0 {
					st.kind = "nop"
					continue
				}
				pick := open[rng.IntN(len(open))]
				if steps[pick].cost == 1 {
					// A full refund leaves the window the request was
					// counted in as the key's latest (a cost-0 request);
					// the replay cannot make one.
					st.kind = "nop"
					continue
				}
				g := grants[pick]
				delete(grants, pick)
				back := 1 + rng.Int64N(steps[pick].cost-1)
				st.grant, st.back = pick, back
				steps[pick].back = back
				if err := s.Refund(ctx, g, []int64{back}); err != nil {
					t.Fatal(err)
				}
			case "debit":
				d, err := s.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: st.lim, Cost: st.cost, Debit: true}})
				if err != nil {
					t.Fatal(err)
				}
				st.allowed, st.res = d.Allowed, d.Results[0]
			case "peek":
				res, err := s.Peek(ctx, "k", st.lim, st.cost)
				if err != nil {
					t.Fatal(err)
				}
				st.allowed, st.res = res.Allowed, res
			case "reset":
				if err := s.Reset(ctx, "k", st.lim); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.Close()

		// The replay.
		clock = redlimittest.NewClock(redlimittest.T0)
		r, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		fail := func(i int, format string, args ...any) {
			var b strings.Builder
			for j, st := range steps[:i+1] {
				fmt.Fprintf(&b, "  %d: %s dt=%v lim=%v cost=%d grant=%d back=%d -> allowed=%v %+v\n", j, st.kind, st.dt, st.lim, st.cost, st.grant, st.back, st.allowed, st.res)
			}
			t.Fatalf("seed %d, step %d: %s\n%s", seed, i, fmt.Sprintf(format, args...), b.String())
		}
		for i, st := range steps {
			switch st.kind {
			case "clock":
				clock.Advance(st.dt)
			case "admit":
				if !st.allowed || st.cost == st.back {
					continue
				}
				res, err := r.AllowN(ctx, "k", st.lim, st.cost-st.back)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					fail(i, "the store allowed, the replay (cost %d) denies: %+v", st.cost-st.back, res)
				}
			case "debit":
				if _, err := r.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: st.lim, Cost: st.cost, Debit: true}}); err != nil {
					t.Fatal(err)
				}
			case "peek":
				res, err := r.Peek(ctx, "k", st.lim, st.cost)
				if err != nil {
					t.Fatal(err)
				}
				if st.allowed && !res.Allowed {
					fail(i, "the store's Peek allows, the replay's denies: %+v", res)
				}
				before := func(allowed bool, res redlimit.Result) int64 {
					if allowed {
						return res.Remaining + st.cost
					}
					return res.Remaining
				}
				if a, b := before(st.allowed, st.res), before(res.Allowed, res); a > b {
					fail(i, "the store has %d remaining, the replay %d", a, b)
				}
				if !st.allowed && !res.Allowed && st.res.RetryAfter < res.RetryAfter {
					fail(i, "the store's RetryAfter %v is shorter than the replay's %v", st.res.RetryAfter, res.RetryAfter)
				}
			case "reset":
				if err := r.Reset(ctx, "k", st.lim); err != nil {
					t.Fatal(err)
				}
			}
		}
		r.Close()
	}
}
