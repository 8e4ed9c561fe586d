package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// flaky is a redisstore.Store whose calls fail as its test says: a key's
// calls fail while the key is down (every key, or some: a Cluster master's
// keys), and a charge (DebitOnce) may lose its reply after Redis counted
// it (a timeout: not known to be counted).
type flaky struct {
	*redisstore.Store
	mu       sync.Mutex
	down     map[string]bool // keys down; "*": all
	loseNext int             // the next charges to count and then fail
	charges  []string        // what DebitOnce was called with, and did
}

var errLost = errors.New("reply lost")

func (s *flaky) isDown(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down["*"] {
		return true
	}
	for _, k := range keys {
		if s.down[k] {
			return true
		}
	}
	return false
}

func reqKeys(reqs []redlimit.Request) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	return keys
}

func (s *flaky) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.isDown(key) {
		return redlimit.Result{}, errDown
	}
	return s.Store.AllowN(ctx, key, l, n)
}

func (s *flaky) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s.isDown(reqKeys(reqs)...) {
		return redlimit.Decision{}, errDown
	}
	return s.Store.AllowAll(ctx, reqs)
}

func (s *flaky) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.isDown(key) {
		return redlimit.Result{}, errDown
	}
	return s.Store.Peek(ctx, key, l, n)
}

func (s *flaky) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if s.isDown(reqKeys(reqs)...) {
		return nil, errDown
	}
	return s.Store.Admit(ctx, reqs)
}

func (s *flaky) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if s.isDown(reqKeys(g.Requests)...) {
		return errDown
	}
	return s.Store.Refund(ctx, g, back)
}

func (s *flaky) DebitOnce(ctx context.Context, req redlimit.Request, id string) (redlimit.Result, bool, error) {
	if s.isDown(req.Key) {
		return redlimit.Result{}, false, errDown
	}
	r, counted, err := s.Store.DebitOnce(ctx, req, id)
	s.mu.Lock()
	lose := s.loseNext > 0
	if lose {
		s.loseNext--
	}
	s.mu.Unlock()
	s.mu.Lock()
	s.charges = append(s.charges, fmt.Sprintf("%s %s %d counted=%v err=%v lost=%v", req.Key[:2], id[:4], req.Cost, counted, err, lose))
	s.mu.Unlock()
	if err == nil && lose {
		return redlimit.Result{}, false, errLost
	}
	return r, counted, err
}

// seedCount returns how many seeds a randomized test runs: def, short
// with -short, or REDLIMIT_SEEDS for a longer hunt.
func seedCount(def, short uint64) uint64 {
	if n, err := strconv.ParseUint(os.Getenv("REDLIMIT_SEEDS"), 10, 64); err == nil {
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}

// TestRandomOutagesOneNode: one node, a few keys under a sliding log of an
// hour (nothing drains during the test), and random steps: the store down
// for every key, for some keys only (the breaker may stay closed), or up;
// charges whose reply is lost after Redis counted them; decisions by
// Allow, AllowN, Admit then a Refund of part of it, Peek. However they
// fall, the node never admits more than the limit (net of what Refunds
// gave back), and once every debt is charged Redis has counted at least
// what was admitted, and no more than that plus what the local fallback
// gave back after its units were charged.
func TestRandomOutagesOneNode(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for seed := range seedCount(40, 10) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xa77ac4))
			ctx := context.Background()
			store := &flaky{Store: redisStore(t, []string{srv.Addr()}), down: map[string]bool{}}
			rec := newRecorder()
			l := newLimiter(t, store, resilient.Options{
				Breaker: resilient.BreakerOptions{FailureThreshold: 1 + rng.IntN(3), CoolDown: time.Millisecond}, Fallback: resilient.FallbackOptions{Rejoin: time.Hour}, Reconcile: resilient.ReconcileOptions{Spread: -1}, Timeout: time.Second,
				Observer: rec,
			})
			decided := map[string]int{} // what the Observer must have been told
			lim := redlimit.PerHour(int64(5 + rng.IntN(40))).SlidingLog()
			keys := []string{fmt.Sprint("a", rng.Uint64()), fmt.Sprint("b", rng.Uint64()), fmt.Sprint("c", rng.Uint64())}
			net := map[string]int64{}
			// What the breaker's probe admitted: it charges nothing owed
			// first (docs/RELIABILITY.md, "When": one decision per node
			// and outage that does not see the debt).
			probed := map[string]int64{}
			given := map[string]int64{} // given back by the local fallback
			var log []string
			check := func(step int) {
				for _, k := range keys {
					if net[k] > lim.Count+probed[k] {
						t.Fatalf("step %d: %s: %d admitted net, limit %d, %d by probes\n%v", step, k, net[k], lim.Count, probed[k], log)
					}
				}
			}
			for step := range 150 {
				switch p := rng.IntN(100); {
				case p < 8:
					store.mu.Lock()
					clear(store.down)
					store.down["*"] = true
					store.mu.Unlock()
					log = append(log, "all down")
				case p < 14:
					store.mu.Lock()
					clear(store.down)
					k := keys[rng.IntN(len(keys))]
					store.down[k] = true
					store.mu.Unlock()
					log = append(log, k+" down")
				case p < 24:
					store.mu.Lock()
					clear(store.down)
					store.mu.Unlock()
					log = append(log, "up")
					time.Sleep(2 * time.Millisecond) // past the breaker's cool-down, sometimes

				case p < 28:
					store.mu.Lock()
					store.loseNext = 1 + rng.IntN(2)
					store.mu.Unlock()
					log = append(log, "lose charges")
				case p < 34:
					k := keys[rng.IntN(len(keys))]
					if _, err := l.Peek(ctx, k, lim, 1); err != nil {
						t.Fatal(err)
					}
				case p < 70:
					k := keys[rng.IntN(len(keys))]
					n := int64(1 + rng.IntN(3))
					probe := l.BreakerState() != "closed"
					r, err := l.AllowN(ctx, k, lim, n)
					if err != nil {
						t.Fatal(err)
					}
					decided[decisionKey(r.Allowed, r.Source)]++
					if r.Allowed {
						net[k] += n
						if probe && r.Source == redlimit.FromStore {
							probed[k] += n
						}
					}
					log = append(log, fmt.Sprintf("allow %s %d: %v %s", k, n, r.Allowed, r.Source))
				default:
					k := keys[rng.IntN(len(keys))]
					n := int64(1 + rng.IntN(3))
					probe := l.BreakerState() != "closed"
					g, err := l.Admit(ctx, []redlimit.Request{{Key: k, Limit: lim, Cost: n}})
					if err != nil {
						t.Fatal(err)
					}
					decided[decisionKey(g.Results[0].Allowed, g.Results[0].Source)]++
					if probe && g.Allowed && g.Results[0].Source == redlimit.FromStore {
						probed[k] += n
					}
					log = append(log, fmt.Sprintf("admit %s %d: %v %s", k, n, g.Allowed, g.Results[0].Source))
					if !g.Allowed {
						break
					}
					net[k] += n
					if rng.IntN(2) == 0 {
						back := rng.Int64N(n + 1)
						if err := l.Refund(ctx, g, []int64{back}); err == nil {
							net[k] -= back
							if g.Results[0].Source == redlimit.FromLocal {
								given[k] += back
							}
							log = append(log, fmt.Sprintf("refund %d", back))
						} else {
							log = append(log, fmt.Sprintf("refund %d failed", back))
						}
					}
				}
				check(step)
			}
			checkObserved(t, rec, decided)
			store.mu.Lock()
			clear(store.down)
			store.loseNext = 0
			store.mu.Unlock()
			backOnStore(t, l)
			for _, k := range keys {
				l.Peek(ctx, k, lim, 1) // charges what k owes, in doubt included
			}
			if !waitFor(10*time.Second, func() bool { return l.Reconciliation().Owed == 0 }) {
				t.Fatalf("still owed: %+v", l.Reconciliation())
			}
			for _, k := range keys {
				r, err := store.Store.Peek(ctx, k, lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed {
					continue // at or above the limit: Redis does not say by how much
				}
				used := lim.Count - r.Remaining - 1 // Peek's Remaining is after its cost of 1

				if used < net[k] || used > net[k]+given[k] {
					t.Errorf("%s: Redis counts %d, admitted %d net (%d given back locally); reconciliation %+v\n%v\ncharges %q", k, used, net[k], given[k], l.Reconciliation(), log, store.charges)
				}
			}
		})
	}
}

// checkObserved checks that rec was told the decisions of want (decision
// counts) and breaker changes that chain from closed.
func checkObserved(t *testing.T, rec *recorder, want map[string]int) {
	t.Helper()
	got, _, _, changes := rec.snapshot()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the Observer was told %v, the results were %v", got, want)
	}
	state := "closed"
	for _, c := range changes {
		if c.from != state || c.from == c.to {
			t.Errorf("breaker changes %v: %s to %s after %s", changes, c.from, c.to, state)
			return
		}
		state = c.to
	}
}

// TestRandomOutagesAtTheRate: 2 to 4 nodes share one state of a random
// algorithm on an injected clock, through random phases: Redis up, down
// for every node, or cut off from one node alone (a partition), with
// traffic at one, two or four times the rate; the last phase is at the
// rate, with Redis up. However they fall:
//   - within any period, no more is admitted than the algorithm allows,
//     plus the outage's bounds (docs/RELIABILITY.md, "The 10% target"):
//     the shares' rounding, a partitioned node's share, stale answers, and
//     a probe per node;
//   - once every debt is charged, Redis is no looser than had it counted
//     every admission when it was made (a token bucket: when no node was
//     cut off alone; see "What is charged");
//   - traffic at the rate is admitted at the rate (half of it at least)
//     once the exact answer admits again and what was charged has left
//     the windows (a token bucket: a period after).
func TestRandomOutagesAtTheRate(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	algs := []redlimit.Algorithm{redlimit.SlidingLog, redlimit.FixedWindow, redlimit.SlidingWindow, redlimit.TokenBucket}
	for seed := range seedCount(16, 4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x4a7e))
			n := 2 + rng.IntN(3)
			s := newSimNodes(t, srv, n)
			lim := redlimit.PerSecond(int64(4 + rng.IntN(21)))
			lim.Algorithm = algs[rng.IntN(len(algs))]
			if lim.Algorithm == redlimit.TokenBucket {
				lim.Burst = 1 + rng.Int64N(2*lim.Count)
			}
			key := fmt.Sprint("k", rng.Uint64())
			var evs []simEvent
			var log []string
			partitioned, cut := false, false
			phases := 2 + rng.IntN(3)
			for ph := range phases {
				if cut {
					s.cut(nil, false)
					cut = false
				}
				last := ph == phases-1 // an outage, then traffic at the rate
				what := "up"
				switch p := rng.IntN(3); {
				case p == 1 || last && p == 0:
					s.cut(nil, true)
					what, cut = "all down", true
				case p == 2:
					i := rng.IntN(n)
					s.cut([]int{i}, true)
					what, cut, partitioned = fmt.Sprint("node ", i, " down"), true, true
				}
				factor := []int{1, 2, 4}[rng.IntN(3)]
				d := time.Duration(1+rng.IntN(3)) * lim.Period
				if last {
					factor, d = 1+rng.IntN(2), time.Duration(2+rng.IntN(6))*lim.Period
				}
				log = append(log, fmt.Sprintf("%s %s at %dx", what, d, factor))
				evs = append(evs, s.run(t, key, lim, d, lim.Period/time.Duration(int64(factor)*lim.Count))...)
			}
			s.cut(nil, false)
			back := time.Duration(s.at.Load())

			// The exact answer: one store that counted every admission
			// when it was made.
			ctx := context.Background()
			var at time.Duration
			replay, err := memory.New(memory.WithClock(func() time.Time { return s.base.Add(at) }))
			if err != nil {
				t.Fatal(err)
			}
			defer replay.Close()
			replayed := 0
			exactly := func(until time.Duration) redlimit.Result {
				for ; replayed < len(evs); replayed++ {
					if e := evs[replayed]; e.allowed {
						at = e.at
						if _, err := replay.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: lim, Cost: 1, Debit: true}}); err != nil {
							t.Fatal(err)
						}
					}
				}
				at = until
				r, err := replay.Peek(ctx, key, lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// What the outages admitted above the limit is denied after
			// them, exactly; then traffic at the rate is admitted at the
			// rate, once what was charged has left the windows.
			wait := exactly(back).RetryAfter
			from := back + wait + lim.Period
			switch lim.Algorithm {
			case redlimit.SlidingLog, redlimit.FixedWindow:
				from += lim.Period
			case redlimit.SlidingWindow:
				from += 2 * lim.Period
			}
			evs = append(evs, s.run(t, key, lim, from-back+2*lim.Period, lim.Period/time.Duration(lim.Count))...)
			if !waitFor(10*time.Second, func() bool {
				for _, l := range s.nodes {
					if l.Reconciliation().Owed != 0 {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("still owed after 10 s: %s", log)
			}
			desc := fmt.Sprintf("%s, %d nodes, %v, exact wait after %s", lim, n, log, wait)

			exact := lim.Count // what the algorithm admits within a period
			switch lim.Algorithm {
			case redlimit.FixedWindow, redlimit.SlidingWindow:
				exact = 2 * lim.Count
			case redlimit.TokenBucket:
				exact = lim.Burst + lim.Count
			}
			// A node's share, within a period: ceil(Count/N), and a token
			// bucket's ceil(Burst/N); the nodes' shares' rounding; the
			// share of a node cut off alone; stale answers and probes.
			share := (lim.Count + int64(n) - 1) / int64(n)
			rounding := int64(n)*share - lim.Count
			if lim.Algorithm == redlimit.TokenBucket {
				b := (lim.Burst + int64(n) - 1) / int64(n)
				share += b
				rounding += int64(n)*b - lim.Burst
			}
			bound := int(exact + rounding + share + int64(2*n))
			if most := maxInWindow(evs, lim.Period); most > bound {
				t.Errorf("%s: %d admitted within a period, bound %d", desc, most, bound)
			}

			// Each node's last answer may miss what the others spent
			// since, one each: up to one in all per node.
			if want := exactly(time.Duration(s.at.Load())); !partitioned || lim.Algorithm != redlimit.TokenBucket {
				got, err := s.redis.Peek(ctx, key, lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if got.Remaining > want.Remaining+int64(n) {
					t.Errorf("%s: Redis has %d left, had it counted every admission when made %d", desc, got.Remaining, want.Remaining)
				}
			}

			// Half: a sliding window at the rate denies some by itself.
			if got := admitted(evs, from, from+lim.Period); 2*int64(got) < lim.Count {
				t.Errorf("%s: %d admitted in a period at the rate from %s after the outages, want about %d", desc, got, from-back, lim.Count)
			}
		})
	}
}
