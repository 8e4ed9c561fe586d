package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// switchable is a store that fails every call while down is set: one
// node's way to a store that is failing for it and not for the others.
type switchable struct {
	redlimit.Limiter
	down *atomic.Bool
}

var errDown = errors.New("switched off")

func (s switchable) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.down.Load() {
		return redlimit.Result{}, errDown
	}
	return s.Limiter.AllowN(ctx, key, l, n)
}

func (s switchable) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s.down.Load() {
		return redlimit.Decision{}, errDown
	}
	return s.Limiter.AllowAll(ctx, reqs)
}

func (s switchable) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.down.Load() {
		return redlimit.Result{}, errDown
	}
	return s.Limiter.Peek(ctx, key, l, n)
}

// rejoiningNode returns a node on srv's Redis, under prefix (nil: a prefix
// of its own), whose store fails while down is set, with opts and what
// every rejoin test wants besides: the breaker open at the first failure
// and probing again after 20 ms, and charges sent at once.
func rejoiningNode(t *testing.T, srv *redistest.Server, prefix redisstore.Option, down *atomic.Bool, opts resilient.Options) *resilient.Limiter {
	t.Helper()
	var popts []redisstore.Option
	if prefix != nil {
		popts = append(popts, prefix)
	}
	opts.Breaker.FailureThreshold, opts.Breaker.CoolDown, opts.Reconcile.Spread = 1, 20*time.Millisecond, -1
	// Only the failures down makes count: a busy host outlasts 50 ms,
	// and a charge cut off by its timeout is in doubt.
	opts.Timeout = 10 * time.Second
	return newLimiter(t, switchable{redisStore(t, []string{srv.Addr()}, popts...), down}, opts)
}

// TestRejoinKeepsNodesWithinTheirShares: two nodes share a limit of 100;
// both fall back, A admits 10 by itself and B its whole share, 50; A is
// back on Redis while B still falls back. Rejoining, A admits only the 40
// left of its share: 100 in all. Without it, Redis (told A's 10, not yet
// B's 50) gives A the 90 it has left: 150 in all, the window
// docs/RELIABILITY.md describes.
func TestRejoinKeepsNodesWithinTheirShares(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, c := range []struct {
		name   string
		rejoin time.Duration
		wantA  int // what A admits on Redis once back
	}{{"rejoining", time.Hour, 40}, {"rejoining for ever", math.MaxInt64, 40}, {"off", -1, 90}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			lim := redlimit.PerHour(100).SlidingLog() // exact, and no window boundary to cross
			key := fmt.Sprint("k", rand.Uint64())
			var downA, downB atomic.Bool
			prefix := redisstore.WithPrefix(fmt.Sprintf("s%x:", rand.Uint64())) // one Redis state for both nodes
			node := func(down *atomic.Bool) *resilient.Limiter {
				return rejoiningNode(t, srv, prefix, down, resilient.Options{Nodes: fixedNodes(2), Fallback: resilient.FallbackOptions{Rejoin: c.rejoin}})
			}
			a, b := node(&downA), node(&downB)
			downA.Store(true)
			downB.Store(true)
			admitLocally(t, a, key, lim, 10)
			admitLocally(t, b, key, lim, 50)
			if r, err := b.Allow(ctx, key, lim); err != nil || r.Allowed {
				t.Fatalf("B beyond its share of 50: %+v, %v", r, err)
			}
			downA.Store(false)
			backOnStore(t, a)
			if !waitFor(5*time.Second, func() bool { return a.Reconciliation().Owed == 0 }) {
				t.Fatalf("A never charged its 10: %+v", a.Reconciliation())
			}
			admitted, fromStore := 0, 0
			for range 120 {
				r, err := a.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
					if r.Source == redlimit.FromStore {
						fromStore++
					}
				}
			}
			if admitted != c.wantA || fromStore != admitted {
				t.Errorf("A admitted %d once back (%d by Redis), want %d, all by Redis", admitted, fromStore, c.wantA)
			}
		})
	}
}

// TestRejoinShareStandsWhenTheStoreFails: while a node rejoins, a
// decision its share admitted and the store then failed stands as the
// fallback's admission, owed to the store, and is taken from the share
// once: the node's local admissions stay exactly its share.
func TestRejoinShareStandsWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	lim := redlimit.PerHour(100).SlidingLog() // exact, and no window boundary to cross
	key := fmt.Sprint("k", rand.Uint64())
	var down atomic.Bool
	a := rejoiningNode(t, srv, nil, &down, resilient.Options{Nodes: fixedNodes(2), Fallback: resilient.FallbackOptions{Rejoin: time.Hour}})
	down.Store(true)
	admitLocally(t, a, key, lim, 10)
	down.Store(false)
	backOnStore(t, a) // rejoining from now on
	// The 10 charged before the store fails again: a charge cut off
	// would be in doubt, and a store without DebitOnce gets it at most
	// once.
	if !waitFor(5*time.Second, func() bool { return a.Reconciliation().Charged == 10 }) {
		t.Fatalf("the 10 never charged: %+v", a.Reconciliation())
	}
	down.Store(true)
	r, err := a.Allow(ctx, key, lim)
	if err != nil || !r.Allowed || r.Source != redlimit.FromLocal {
		t.Fatalf("the share admitted, the store failed: %+v, %v; want the share's admission", r, err)
	}
	// The share of 50 has 39 left: 10 before, 1 above.
	admitLocally(t, a, key, lim, 39)
	if r, err := a.Allow(ctx, key, lim); err != nil || r.Allowed {
		t.Errorf("beyond the share of 50: %+v, %v", r, err)
	}
	// All 50 were owed, and are charged once the store is back.
	down.Store(false)
	backOnStore(t, a)
	if !waitFor(5*time.Second, func() bool { return a.Reconciliation().Owed == 0 }) {
		t.Fatalf("still owed: %+v", a.Reconciliation())
	}
	if rc := a.Reconciliation(); rc.Charged != 50 {
		t.Errorf("reconciliation %+v: want the 50 admitted locally charged", rc)
	}
}

// TestRejoinBoundsRandomOutages: 2 to 4 nodes share a limit (a sliding
// log, a sliding window or a token bucket); after some
// decisions on Redis (the last one of each node's, so that each starts its
// share from the same remaining), every node falls back and decides at
// random by itself, then the nodes come back one at a time, in random
// order, with random decisions on every node between the returns (those
// still out decide by themselves, those back rejoin). However the
// decisions fall, all the nodes together admit no more than the limit,
// and the shares' rounding (one per node). A node that decides nothing by
// itself during an outage rejoins if its breaker opened (here, on a
// fail_open call); one that made no call at all never saw the store fail.
// The same runs with rejoining off tell how far above the limit they went
// (logged, not asserted).
func TestRejoinBoundsRandomOutages(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// Seeds 0 to 11, and 138, where a node that decided nothing by itself
	// went above its share when only a local decision started the
	// rejoining (150 seeds were tried then; this one failed).
	seeds := []uint64{138}
	for s := range uint64(12) {
		seeds = append(seeds, s)
	}
	for _, rejoin := range []time.Duration{time.Hour, -1} {
		worst := 0
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("rejoin %v, seed %d", rejoin, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0x5e771e))
				n := 2 + rng.IntN(3)
				// Exact algorithms without a window boundary for the real
				// clock to cross mid-test.
				lim := redlimit.PerHour(int64(50 + rng.IntN(200)))
				switch rng.IntN(3) {
				case 0:
					lim = lim.SlidingLog()
				case 1:
					lim = lim.SlidingWindow()
				default:
					lim = lim.TokenBucket(lim.Count)
				}
				key := fmt.Sprint("k", rand.Uint64())
				downs := make([]*atomic.Bool, n)
				nodes := make([]*resilient.Limiter, n)
				prefix := redisstore.WithPrefix(fmt.Sprintf("s%x:", rand.Uint64())) // one Redis state for all nodes
				for i := range nodes {
					downs[i] = new(atomic.Bool)
					nodes[i] = rejoiningNode(t, srv, prefix, downs[i], resilient.Options{Nodes: fixedNodes(n), DenyCache: resilient.DenyCacheOptions{Size: -1}, Fallback: resilient.FallbackOptions{Rejoin: rejoin}})
				}
				admitted := 0
				decide := func(i, tries int) {
					for range tries {
						r, err := nodes[i].Allow(context.Background(), key, lim)
						if err != nil {
							t.Fatal(err)
						}
						if r.Allowed {
							admitted++
						}
					}
				}
				decide(rng.IntN(n), rng.IntN(int(lim.Count)/2))
				for i := range nodes {
					decide(i, 1)
				}
				for i := range nodes {
					downs[i].Store(true)
				}
				for i := range nodes {
					if rng.IntN(4) == 0 {
						// Nothing by itself: a fail_open call opens its
						// breaker, and it rejoins all the same.
						if r, err := nodes[i].Allow(context.Background(), "other", redlimit.PerHour(10).OnFailure(redlimit.FailOpen)); err != nil || r.Source != redlimit.FromFailOpen {
							t.Fatalf("node %d, Redis down: %+v, %v", i, r, err)
						}
						continue
					}
					decide(i, 1+rng.IntN(int(lim.Count)/n+5))
				}
				for _, i := range rng.Perm(n) {
					downs[i].Store(false)
					backOnStore(t, nodes[i])
					for range 1 + rng.IntN(3) {
						decide(rng.IntN(n), rng.IntN(int(lim.Count)/2))
					}
				}
				over := admitted - int(lim.Count)
				worst = max(worst, over)
				if rejoin > 0 && over > n {
					t.Errorf("%d nodes admitted %d of %s: %d above, want at most %d", n, admitted, lim, over, n)
				}
			})
		}
		t.Logf("rejoin %v: worst run %d above the limit", rejoin, worst)
	}
}

// TestRejoinLeavesTheProbe: a node whose only key has spent its share
// during the outage still probes the store and closes its breaker: while
// the breaker is not closed, its decisions go to the store (one is the
// probe) and then to the failure policy, not to the share alone, which
// would ask nothing until the rejoin ended (Rejoin after the last
// failure: here an hour).
func TestRejoinLeavesTheProbe(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	lim := redlimit.PerHour(100).SlidingLog()
	key := fmt.Sprint("k", rand.Uint64())
	var down atomic.Bool
	a := rejoiningNode(t, srv, nil, &down, resilient.Options{Nodes: fixedNodes(2), Fallback: resilient.FallbackOptions{Rejoin: time.Hour}})
	down.Store(true)
	admitLocally(t, a, key, lim, 50)
	down.Store(false)
	// Only key is decided, and its share denies: the probe must still go.
	if !waitFor(5*time.Second, func() bool {
		if _, err := a.Allow(ctx, key, lim); err != nil {
			t.Fatal(err)
		}
		return a.BreakerState() == "closed"
	}) {
		t.Fatalf("the breaker never closed: %s", a.BreakerState())
	}
}

// every is a store that, while n is above 0, fails one call in n: a Redis
// with occasional timeouts, or one master of several down.
type every struct {
	redlimit.Limiter
	n     *atomic.Int64
	calls atomic.Int64
}

func (s *every) fail() bool {
	n := s.n.Load()
	return n > 0 && s.calls.Add(1)%n == 0
}

func (s *every) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s.fail() {
		return redlimit.Decision{}, errDown
	}
	return s.Limiter.AllowAll(ctx, reqs)
}

func (s *every) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.fail() {
		return redlimit.Result{}, errDown
	}
	return s.Limiter.AllowN(ctx, key, l, n)
}

// TestRejoinOutlastsOnlyFrequentFailures: after an outage, failures as
// frequent as a master's keys failing (one call in three) keep the node
// rejoining, and occasional ones (one in 50, never enough in a row to open
// the breaker) do not: else a Redis with the odd timeout would hold a node
// to its share for ever after its first outage. A limit of 2 shows which:
// rejoining, the node's share of 1 denies the second request, which Redis
// would admit.
func TestRejoinOutlastsOnlyFrequentFailures(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, c := range []struct {
		name      string
		oneIn     int64
		rejoining bool
	}{{"one call in 3 fails", 3, true}, {"one call in 50 fails", 50, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// The check comes within a rejoin of the phase's last
			// failure: 2 s is a margin for a busy machine's stalls.
			const rejoin = 2 * time.Second
			var n atomic.Int64
			store := &every{Limiter: redisStore(t, []string{srv.Addr()}), n: &n}
			// A Timeout no call of a busy machine reaches: only the
			// failures the store makes up count.
			opts := resilient.Options{
				Nodes: fixedNodes(2), Breaker: resilient.BreakerOptions{FailureThreshold: 3, CoolDown: 20 * time.Millisecond}, Fallback: resilient.FallbackOptions{Rejoin: rejoin}, Reconcile: resilient.ReconcileOptions{Spread: -1}, Timeout: 10 * time.Second,
			}
			opened := recordOpen(&opts)
			a := newLimiter(t, store, opts)
			open := redlimit.PerHour(1_000_000).OnFailure(redlimit.FailOpen)
			n.Store(1) // every call fails: the breaker opens
			for range 3 {
				if _, err := a.Allow(ctx, "busy", open); err != nil {
					t.Fatal(err)
				}
			}
			if !opened.Load() {
				t.Fatalf("breaker %s after three failures, never opened", a.BreakerState())
			}
			n.Store(0)
			backOnStore(t, a) // the breaker closed: rejoining for a Rejoin from now, at least
			n.Store(c.oneIn)
			calls := 0
			// Long enough, in time and calls, for the share of failures
			// to fall from all (the breaker's opening) and the rejoin
			// then to end.
			for end := time.Now().Add(5 * rejoin / 2); calls < 1000 || time.Now().Before(end); calls++ {
				if _, err := a.Allow(ctx, fmt.Sprint("busy", calls%100), open); err != nil {
					t.Fatal(err)
				}
			}
			if s := a.BreakerState(); s != "closed" {
				t.Fatalf("breaker %s after %d calls failing one in %d, want closed", s, calls, c.oneIn)
			}
			n.Store(0)
			key, lim := fmt.Sprint("k", rand.Uint64()), redlimit.PerHour(2).SlidingLog()
			if r, err := a.Allow(ctx, key, lim); err != nil || !r.Allowed || r.Source != redlimit.FromStore {
				t.Fatalf("first of 2: %+v, %v", r, err)
			}
			r, err := a.Allow(ctx, key, lim)
			if err != nil {
				t.Fatal(err)
			}
			if rejoining := !r.Allowed && r.Source == redlimit.FromLocal; rejoining != c.rejoining {
				t.Errorf("after %d calls failing one in %d: second of 2 %+v; rejoining %v, want %v", calls, c.oneIn, r, rejoining, c.rejoining)
			}
		})
	}
}
