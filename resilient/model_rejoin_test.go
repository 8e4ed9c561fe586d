package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// sparse is a flaky store whose Reset fails while it is down too, and
// whose next decision call fails once when failNext is set: the odd
// timeout of a Redis that is back.
type sparse struct {
	*flaky
	failNext atomic.Bool
	failed   atomic.Int64 // the calls failNext failed
}

var errSparse = errors.New("the odd timeout")

func (s *sparse) fail() bool {
	if s.failNext.CompareAndSwap(true, false) {
		s.failed.Add(1)
		return true
	}
	return false
}

func (s *sparse) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.fail() {
		return redlimit.Result{}, errSparse
	}
	return s.flaky.AllowN(ctx, key, l, n)
}

func (s *sparse) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s.fail() {
		return redlimit.Decision{}, errSparse
	}
	return s.flaky.AllowAll(ctx, reqs)
}

func (s *sparse) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.fail() {
		return redlimit.Result{}, errSparse
	}
	return s.flaky.Peek(ctx, key, l, n)
}

func (s *sparse) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if s.fail() {
		return nil, errSparse
	}
	return s.flaky.Admit(ctx, reqs)
}

func (s *sparse) Reset(ctx context.Context, key string, l redlimit.Limit) error {
	if s.isDown(key) {
		return errDown
	}
	return s.flaky.Reset(ctx, key, l)
}

// TestRandomOutagesRefundsResets: one node of two, keys under a sliding
// log of an hour (nothing drains during the test), one or two outages at
// random, and random steps: Allow, AllowN, Admit of one or two keys whose
// Grants are refunded later (in part, at random), Peek, Reset (which fails
// while Redis is down), and, once Redis is back, a store call that fails
// now and then (at most one in 64 decisions). However they fall:
//   - no key admits more than its limit since its last Reset that
//     Redis made (net of what refunds gave back; a failed Reset gives no
//     fresh share);
//   - every denial from the deny cache is one Redis makes too (refunds and
//     Resets drop the cached denials of their keys);
//   - the rejoin ends: once 120 decisions have passed since the
//     outage's last, the share of failures is below a sixteenth, and
//     Options.Fallback.Rejoin after that no share denies (the odd failure does not
//     keep the node rejoining).
func TestRandomOutagesRefundsResets(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	if n, err := strconv.Atoi(os.Getenv("REDLIMIT_SEEDS")); err == nil {
		seeds = n // a longer hunt
	}
	const (
		rejoin = 250 * time.Millisecond // of the test's clock: longer than the odd failures' spacing
		decay  = 120                    // decisions for the share of failures to fall below a sixteenth
	)
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x5e771e5))
			ctx := context.Background()
			store := &sparse{flaky: &flaky{Store: redisStore(t, []string{srv.Addr()}), down: map[string]bool{}}}
			// The rejoin and the deny cache run on the steps' clock,
			// Redis on its own: nothing an hourly sliding log keeps
			// expires during the test.
			var skip atomic.Int64
			t0 := time.Now().Round(0)
			now := func() time.Time { return t0.Add(time.Duration(skip.Load())) }
			l := newLimiter(t, store, resilient.Options{
				Nodes: fixedNodes(2), Breaker: resilient.BreakerOptions{FailureThreshold: 3, CoolDown: time.Millisecond}, Fallback: resilient.FallbackOptions{Rejoin: rejoin}, Reconcile: resilient.ReconcileOptions{Spread: -1},
				Timeout: 5 * time.Second, Now: now,
			})
			// Keys and limits enough for hundreds of decisions to reach the
			// store after an outage, not the deny cache.
			lim := redlimit.PerHour(int64(20 + rng.IntN(100))).SlidingLog()
			keys := make([]string, 6)
			for i := range keys {
				keys[i] = fmt.Sprint(string(rune('a'+i)), rng.Uint64())
			}
			// A hot key, in some runs: its share spent, the shares deny
			// most decisions while the node rejoins.
			hot := []int{0, 80}[rng.IntN(2)]
			pick := func() string {
				if rng.IntN(100) < hot {
					return keys[0]
				}
				return keys[rng.IntN(len(keys))]
			}
			spacing := 64 + rng.IntN(64) // decisions between odd failures, at least
			// The share of Allows: Admits and Peeks call the store whatever
			// the shares, and the shares answer Allows.
			allows := []int{40, 85, 97}[rng.IntN(3)]
			const steps = 900
			type span struct{ from, to int }
			outages := []span{{10 + rng.IntN(40), 0}}
			outages[0].to = outages[0].from + 5 + rng.IntN(25)
			if rng.IntN(2) == 0 {
				from := 760 + rng.IntN(60)
				outages = append(outages, span{from, from + 5 + rng.IntN(25)})
			}
			net := map[string]int64{}
			probed := map[string]int64{} // what the breaker's probe admitted (see TestRandomOutagesOneNode)
			type held struct {
				g    *redlimit.Grant
				keys []string
			}
			var grants []held
			var log []string
			decisions, since, lastOdd := 0, 0, 0 // since: decisions since the outage's last
			var decayed time.Time                // when since reached decay
			var down bool
			for step := range steps {
				skip.Add(int64(time.Duration(rng.IntN(2_000)) * time.Microsecond))
				wasDown := down
				down = false
				for _, o := range outages {
					down = down || step >= o.from && step < o.to
				}
				if down != wasDown {
					store.mu.Lock()
					store.down["*"] = down
					store.mu.Unlock()
					store.failNext.Store(false)
					log = append(log, fmt.Sprint("down ", down))
					if !down {
						time.Sleep(2 * time.Millisecond) // past the breaker's cool-down
					}
				}
				if !down && decisions-lastOdd >= spacing {
					store.failNext.Store(true)
				}
				// decided notes a decision's results: whether it came from the
				// deny cache, and, for the rejoin, whether it met the
				// outage and whether a share denied it.
				decided := func(what string, rs []redlimit.Result, allowed bool, before int64, breakerWas string, share bool) {
					log = append(log, fmt.Sprintf("%s: %v %s", what, allowed, rs[0].Source))
					for _, r := range rs {
						if r.Source == redlimit.FromDenyCache {
							return // asked nothing; not counted by the rejoin
						}
					}
					decisions++
					odd := store.failed.Load() != before
					if odd {
						lastOdd = decisions
					}
					if down || breakerWas != "closed" || l.BreakerState() != "closed" {
						since, decayed = 0, time.Time{}
						return
					}
					if since++; since == decay {
						decayed = now()
					}
					if share && !odd && !allowed && rs[0].Source == redlimit.FromLocal && !decayed.IsZero() && now().Sub(decayed) >= rejoin {
						t.Fatalf("step %d: %s denied by the share %s after %d decisions since the outage's last (odd failures %d or more apart); the rejoin should have ended %s after the %dth\n%v",
							step, what, now().Sub(decayed), since, spacing, rejoin, decay, tail(log))
					}
				}
				checkCached := func(what string, key string, cost int64, r redlimit.Result) {
					if r.Source != redlimit.FromDenyCache || r.Allowed || down {
						return
					}
					truth, err := store.Store.Peek(ctx, key, lim, cost)
					if err != nil {
						t.Fatal(err)
					}
					if truth.Allowed {
						t.Fatalf("step %d: %s denied from the deny cache (retry after %s), Redis allows %d\n%v", step, what, r.RetryAfter, cost, tail(log))
					}
				}
				breakerWas := l.BreakerState()
				before := store.failed.Load()
				p := 0 // an Allow
				if rng.IntN(100) >= allows {
					p = 40 + rng.IntN(60)
				}
				switch {
				case p < 40:
					k := pick()
					n := int64(1 + rng.IntN(3))
					r, err := l.AllowN(ctx, k, lim, n)
					if err != nil {
						t.Fatal(err)
					}
					what := fmt.Sprintf("allow %s %d", k[:1], n)
					checkCached(what, k, n, r)
					if r.Allowed {
						net[k] += n
						if breakerWas != "closed" && r.Source == redlimit.FromStore {
							probed[k] += n
						}
					}
					decided(what, []redlimit.Result{r}, r.Allowed, before, breakerWas, true)
				case p < 58:
					reqs := []redlimit.Request{{Key: pick(), Limit: lim, Cost: int64(1 + rng.IntN(3))}}
					if rng.IntN(2) == 0 {
						if k := pick(); k != reqs[0].Key {
							reqs = append(reqs, redlimit.Request{Key: k, Limit: lim, Cost: int64(1 + rng.IntN(3))})
						}
					}
					g, err := l.Admit(ctx, reqs)
					if err != nil {
						t.Fatal(err)
					}
					what := fmt.Sprintf("admit %s %d (of %d)", reqs[0].Key[:1], reqs[0].Cost, len(reqs))
					for i, r := range g.Results {
						checkCached(what, reqs[i].Key, reqs[i].Cost, r)
					}
					if g.Allowed {
						h := held{g: g}
						for _, r := range reqs {
							net[r.Key] += r.Cost
							h.keys = append(h.keys, r.Key)
							if breakerWas != "closed" && g.Results[0].Source == redlimit.FromStore {
								probed[r.Key] += r.Cost
							}
						}
						grants = append(grants, h)
					}
					decided(what, g.Results, g.Allowed, before, breakerWas, false)
				case p < 75:
					if len(grants) == 0 {
						break
					}
					i := rng.IntN(len(grants))
					h := grants[i]
					grants = append(grants[:i], grants[i+1:]...)
					back := make([]int64, len(h.g.Requests))
					for j, r := range h.g.Requests {
						back[j] = rng.Int64N(r.Cost + 1)
					}
					if err := l.Refund(ctx, h.g, back); err != nil {
						log = append(log, fmt.Sprintf("refund %v failed", back))
						break
					}
					for j, r := range h.g.Requests {
						net[r.Key] -= back[j]
					}
					log = append(log, fmt.Sprintf("refund %v", back))
				case p < 83:
					k := pick()
					if _, err := l.Peek(ctx, k, lim, 1); err != nil {
						t.Fatal(err)
					}
					decided("peek "+k[:1], []redlimit.Result{{Source: redlimit.FromStore}}, true, before, breakerWas, false)
				case p < 88 || down && p < 95:
					k := pick()
					err := l.Reset(ctx, k, lim)
					log = append(log, fmt.Sprintf("reset %s: %v", k[:1], err))
					if down != (err != nil) {
						t.Fatalf("step %d: reset with Redis down %v: %v", step, down, err)
					}
					if err != nil {
						break
					}
					net[k], probed[k] = 0, 0
					// A refund gives nothing back across a Reset.
					kept := grants[:0]
					for _, h := range grants {
						touches := false
						for _, hk := range h.keys {
							touches = touches || hk == k
						}
						if !touches {
							kept = append(kept, h)
						}
					}
					grants = kept
				}
				for _, k := range keys {
					if net[k] > lim.Count+probed[k] {
						t.Fatalf("step %d: %s: %d admitted net since its last Reset, limit %d, %d by probes\n%v", step, k[:1], net[k], lim.Count, probed[k], tail(log))
					}
				}
			}
		})
	}
}

// tail returns the last steps of log, for a failure's message.
func tail(log []string) []string { return log[max(0, len(log)-60):] }
