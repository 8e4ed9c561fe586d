package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestAdmitRefundDebitOnceDifferential runs random sequences of Admit,
// Refund (partial, repeated, after resets), DebitOnce (ids reused, with
// other costs), AllowN, Peek and Reset (on a clock stepped back, which may
// stay back) on the memory store and on Redis at the same instants, and
// compares every answer field by field. DebitOnce
// is modelled on the memory store as a debit counted the first time an id
// is seen for a key's state.
func TestAdmitRefundDebitOnceDifferential(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(10, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(10, 100*time.Millisecond).SlidingWindow(),
		redlimit.Per(10, 100*time.Millisecond).SlidingLog(),
		redlimit.Per(100, time.Second).TokenBucket(10),
		redlimit.Per(3, time.Second).TokenBucket(4),
	}
	keys := []string{"a", "{b}", "%7Bb%7D", "c#1", strings.Repeat("x", 200), "\xff\xfe"}
	for _, d := range attackDeployments() {
		t.Run(d.name, func(t *testing.T) {
			lims := limits
			if d.cluster {
				// A decision split by hash tag gives a token bucket back
				// approximately (documented): compare the other algorithms.
				lims = limits[:3]
			}
			ctx := context.Background()
			clock := redlimittest.NewClock(today)
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(24*time.Hour), redisstore.WithPrefix(prefix(t)))
			for seed := range seeds(300) {
				mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 24))
				pre := fmt.Sprintf("s%d/", seed)
				type pair struct{ m, r *redlimit.Grant }
				var grants []pair
				once := map[string]bool{}
				var hist []string
				fail := func(format string, args ...any) {
					t.Helper()
					t.Fatalf("seed %d: %s\nhistory:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(hist[max(0, len(hist)-70):], "\n"))
				}
				req := func() redlimit.Request {
					l := lims[rng.IntN(len(lims))]
					return redlimit.Request{Key: pre + keys[rng.IntN(len(keys))], Limit: l, Cost: int64(1 + rng.IntN(int(l.Max())))}
				}
				for step := range 60 {
					if rng.IntN(3) == 0 {
						clock.Advance(time.Duration(rng.Int64N(40_000)) * time.Microsecond)
					}
					at := clock.Now().UnixMicro()
					switch op := rng.IntN(10); {
					case op < 3: // Admit
						reqs := []redlimit.Request{req()}
						if rng.IntN(3) == 0 {
							r2 := req()
							r2.Debit = rng.IntN(3) == 0
							reqs = append(reqs, r2)
						}
						gm, e1 := mem.Admit(ctx, append([]redlimit.Request(nil), reqs...))
						gr, e2 := rs.Admit(ctx, append([]redlimit.Request(nil), reqs...))
						if (e1 == nil) != (e2 == nil) {
							fail("admit: %v %v", e1, e2)
						}
						if e1 != nil {
							continue
						}
						hist = append(hist, fmt.Sprintf("%d #%d admit %+v -> %+v", at, len(grants), reqs, gm.Decision))
						if d.cluster && gm.Allowed != gr.Allowed || !d.cluster && fmt.Sprint(gm.Decision) != fmt.Sprint(gr.Decision) {
							fail("step %d admit %+v:\nmemory %+v\nredis  %+v", step, reqs, gm.Decision, gr.Decision)
						}
						grants = append(grants, pair{gm, gr})
					case op < 6 && len(grants) > 0: // Refund
						g := grants[rng.IntN(len(grants))]
						back := make([]int64, len(g.m.Requests))
						for i, r := range g.m.Requests {
							if !r.Debit {
								back[i] = rng.Int64N(r.Cost + 1)
							}
						}
						e1 := mem.Refund(ctx, g.m, back)
						e2 := rs.Refund(ctx, g.r, back)
						hist = append(hist, fmt.Sprintf("%d refund %+v back %v: %v", at, g.m.Requests, back, e1))
						if errors.Is(e1, redlimit.ErrRefunded) != errors.Is(e2, redlimit.ErrRefunded) || (e1 == nil) != (e2 == nil) {
							fail("refund errors: %v, %v", e1, e2)
						}
					case op < 7: // DebitOnce
						r := req()
						id := fmt.Sprint("id", rng.IntN(3))
						got, counted, err := rs.DebitOnce(ctx, r, id)
						if err != nil {
							fail("debit once: %v", err)
						}
						mk := fmt.Sprintf("%q/%v/%v/%s", r.Key, r.Limit.Algorithm, r.Limit.Period, id)
						var want redlimit.Result
						if once[mk] {
							want, err = mem.Peek(ctx, r.Key, r.Limit, r.Cost)
						} else {
							once[mk] = true
							r.Debit = true
							var dd redlimit.Decision
							dd, err = mem.AllowAll(ctx, []redlimit.Request{r})
							want = dd.Results[0]
						}
						hist = append(hist, fmt.Sprintf("%d debitonce %+v %s -> %v %+v", at, r, id, counted, got))
						if err != nil || got != want || counted == once[mk] && false {
							fail("debit once %+v %s: counted %v\nmemory %+v\nredis  %+v", r, id, counted, want, got)
						}
					case op < 9: // AllowN / Peek
						r := req()
						peek := rng.IntN(2) == 0
						f1, f2 := mem.AllowN, rs.AllowN
						if peek {
							f1, f2 = mem.Peek, rs.Peek
						}
						r1, e1 := f1(ctx, r.Key, r.Limit, r.Cost)
						r2, e2 := f2(ctx, r.Key, r.Limit, r.Cost)
						hist = append(hist, fmt.Sprintf("%d allow peek=%v %+v -> %+v", at, peek, r, r1))
						if e1 != nil || e2 != nil || r1 != r2 {
							fail("allow peek=%v %+v:\nmemory %+v %v\nredis  %+v %v", peek, r, r1, e1, r2, e2)
						}
					default: // Reset, on a clock that may be behind
						r := req()
						// A reset on a server whose clock is behind the
						// others' (back, then forward again), or after which
						// the clock stays back (a failover to such a server).
						behind := time.Duration(0)
						if rng.IntN(2) == 0 {
							behind = time.Duration(1+rng.Int64N(20_000)) * time.Microsecond
							clock.Advance(-behind)
						}
						e1 := mem.Reset(ctx, r.Key, r.Limit)
						e2 := rs.Reset(ctx, r.Key, r.Limit)
						hist = append(hist, fmt.Sprintf("%d reset %+v, clock back %s", clock.Now().UnixMicro(), r, behind))
						if e1 != nil || e2 != nil {
							fail("reset: %v %v", e1, e2)
						}
						if rng.IntN(2) == 0 {
							clock.Advance(behind)
						}
					}
				}
				// Compare every key's state at the end.
				for _, k := range keys {
					for _, l := range lims {
						for _, c := range []int64{1, l.Max()} {
							r1, _ := mem.Peek(ctx, pre+k, l, c)
							r2, _ := rs.Peek(ctx, pre+k, l, c)
							if r1 != r2 {
								fail("final %q %s cost %d:\nmemory %+v\nredis  %+v", k, l, c, r1, r2)
							}
						}
					}
				}
				mem.Close()
				clock.Advance(10 * time.Second)
			}
		})
	}
}

// seeds returns n, or ATTACK_SEEDS when set, for longer runs by hand.
func seeds(n uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv("ATTACK_SEEDS"), 10, 64); err == nil {
		return v
	}
	return n
}

// attackDeployments are the deployments the attack tests run on: the
// standalone rueidis one, or those ATTACK_DEPLOYMENTS=all names.
func attackDeployments() []deployment {
	if os.Getenv("ATTACK_DEPLOYMENTS") == "all" {
		return deployments
	}
	return standalone[:1]
}
