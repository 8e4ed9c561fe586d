package resilient_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/resilient"
)

func TestDenyCacheAnswersWithoutTheStore(t *testing.T) {
	t.Parallel()
	store := &counting{Limiter: redisStore(t, []string{redistest.Shared(t).Addr()})}
	l := newLimiter(t, store, resilient.Options{})
	ctx := context.Background()
	lim := redlimit.PerHour(3).SlidingLog()
	for i := range 3 {
		if r, err := l.AllowN(ctx, "k", lim, 1); err != nil || !r.Allowed || r.Source != redlimit.FromStore {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
	}
	r, err := l.AllowN(ctx, "k", lim, 1)
	if err != nil || r.Allowed || r.Source != redlimit.FromStore {
		t.Fatalf("4th: %+v, %v; want the store's denial", r, err)
	}
	for range 100 {
		r, err := l.AllowN(ctx, "k", lim, 2)
		if err != nil || r.Allowed || r.Source != redlimit.FromDenyCache || r.RetryAfter <= 0 || r.RetryAfter > time.Hour {
			t.Fatalf("cached: %+v, %v", r, err)
		}
	}
	if n := store.calls.Load(); n != 4 {
		t.Errorf("the store was called %d times, want 4", n)
	}
	// Another key, another limit on the key: not cached.
	if r, _ := l.AllowN(ctx, "k", redlimit.PerHour(3).FixedWindow(), 1); !r.Allowed || r.Source != redlimit.FromStore {
		t.Errorf("another limit of the key: %+v", r)
	}
	// A Reset clears the cached denial.
	if err := l.Reset(ctx, "k", lim); err != nil {
		t.Fatal(err)
	}
	if r, _ := l.AllowN(ctx, "k", lim, 1); !r.Allowed || r.Source != redlimit.FromStore {
		t.Errorf("after Reset: %+v", r)
	}
}

// TestDenyCacheNeverDeniesWhatTheStoreAllows drives two limiters (two nodes)
// on one Redis with a shared explicit clock, and checks every cached denial
// against the store itself at the same instant.
func TestDenyCacheNeverDeniesWhatTheStoreAllows(t *testing.T) {
	t.Parallel()
	addr := redistest.Shared(t).Addr()
	clock := redlimittest.NewClock(redlimittest.T0)
	// TTLs run on Redis's clock: the margin keeps state while the explicit
	// clock jumps.
	raw := redisStore(t, []string{addr}, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour))
	nodes := []*resilient.Limiter{
		newLimiter(t, raw, resilient.Options{Now: clock.Now}),
		newLimiter(t, raw, resilient.Options{Now: clock.Now}),
	}
	limits := []redlimit.Limit{
		redlimit.Per(5, 200*time.Millisecond).SlidingLog(),
		redlimit.Per(5, 200*time.Millisecond).FixedWindow(),
		redlimit.Per(5, 200*time.Millisecond).SlidingWindow(),
		redlimit.Per(25, time.Second).TokenBucket(3),
	}
	rng := rand.New(rand.NewPCG(11, 12))
	ctx := context.Background()
	cached := 0
	for range 5000 {
		clock.Advance(time.Duration(rng.IntN(4000)) * time.Microsecond)
		lim := limits[rng.IntN(len(limits))]
		key := []string{"a", "b"}[rng.IntN(2)]
		cost := int64(1 + rng.IntN(3))
		r, err := nodes[rng.IntN(2)].AllowN(ctx, key, lim, cost)
		if err != nil {
			t.Fatal(err)
		}
		if r.Source != redlimit.FromDenyCache {
			continue
		}
		cached++
		truth, err := raw.Peek(ctx, key, lim, cost)
		if err != nil {
			t.Fatal(err)
		}
		if truth.Allowed {
			t.Fatalf("%q %s cost %d: denied from the cache (retry after %s) but the store allows", key, lim, cost, r.RetryAfter)
		}
	}
	if cached < 500 {
		t.Errorf("only %d answers came from the deny cache", cached)
	}
	t.Logf("%d cached denials checked against the store", cached)
}

func TestPoliciesWhenRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Nodes: fixedNodes(3)})
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := redlimit.PerHour(10).SlidingLog()
	open, closed, local := base.OnFailure(redlimit.FailOpen), base.OnFailure(redlimit.FailClosed), base
	for range 20 {
		r, err := l.AllowN(ctx, "o", open, 1)
		if err != nil || !r.Allowed || r.Source != redlimit.FromFailOpen {
			t.Fatalf("fail_open: %+v, %v", r, err)
		}
		r, err = l.AllowN(ctx, "c", closed, 1)
		if err != nil || r.Allowed || r.Source != redlimit.FromFailClosed || r.RetryAfter <= 0 {
			t.Fatalf("fail_closed: %+v, %v", r, err)
		}
	}
	admitted := 0
	for range 20 {
		r, err := l.AllowN(ctx, "l", local, 1)
		if err != nil || r.Source != redlimit.FromLocal {
			t.Fatalf("local: %+v, %v", r, err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 4 { // ceil(10 / 3 nodes)
		t.Errorf("local fallback admitted %d, want this node's share of 4", admitted)
	}
	// Several limits: a fail_closed one denies, and the local one is not consumed.
	d, err := l.AllowAll(ctx, []redlimit.Request{{Key: "m", Limit: local, Cost: 1}, {Key: "m2", Limit: closed, Cost: 1}})
	if err != nil || d.Allowed || d.Results[0].Source != redlimit.FromLocal || d.Results[1].Source != redlimit.FromFailClosed {
		t.Fatalf("mixed: %+v, %v", d, err)
	}
	if r, _ := l.Peek(ctx, "m", local, 4); !r.Allowed {
		t.Errorf("the denied mixed request consumed the local limit: %+v", r)
	}
	if l.BreakerState() != "open" {
		t.Errorf("breaker %s after repeated failures, want open", l.BreakerState())
	}
	if err := l.Reset(ctx, "o", open); !errors.Is(err, resilient.ErrStore) {
		t.Errorf("Reset with Redis down: %v, want ErrStore", err)
	}
}

func TestBreakerClosesWhenRedisReturns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{})
	ctx := context.Background()
	lim := redlimit.PerHour(1000).FixedWindow()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := l.AllowN(ctx, "k", lim, 1); err != nil {
			t.Fatal(err)
		}
	}
	if l.BreakerState() != "open" {
		t.Fatalf("breaker %s, want open", l.BreakerState())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	ok := waitFor(3*time.Second, func() bool {
		r, err := l.AllowN(ctx, "k", lim, 1)
		return err == nil && r.Source == redlimit.FromStore
	})
	took := time.Since(back)
	if !ok || took > time.Second {
		t.Errorf("decisions back on Redis after %s (ok=%v), want within 1s", took, ok)
	}
	if l.BreakerState() != "closed" {
		t.Errorf("breaker %s, want closed", l.BreakerState())
	}
}

func TestDeadlineWhenRedisHangs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: 30 * time.Millisecond, FailureThreshold: 1000})
	ctx := context.Background()
	lim := redlimit.PerHour(1000).SlidingWindow()
	if _, err := l.AllowN(ctx, "k", lim, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	for range 5 {
		start := time.Now()
		r, err := l.AllowN(ctx, "k", lim, 1)
		took := time.Since(start)
		if err != nil || r.Source != redlimit.FromLocal {
			t.Fatalf("%+v, %v", r, err)
		}
		if took > 30*time.Millisecond+50*time.Millisecond {
			t.Errorf("a decision took %s with a 30ms deadline", took)
		}
	}
	// The caller's earlier deadline wins, and its end is the caller's error.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if r, err := l.AllowN(cctx, "k", lim, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller deadline: %+v, %v, want DeadlineExceeded", r, err)
	}
}

func TestNodeRegistry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := redisStore(t, []string{srv.Addr()})
	ctx := context.Background()
	opts := redisstore.RegistryOptions{Interval: 50 * time.Millisecond}
	var regs []*redisstore.Registry
	for range 3 {
		r, err := s.Register(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
		defer r.Close()
	}
	if !waitFor(time.Second, func() bool { return regs[0].Nodes() == 3 }) {
		t.Fatalf("nodes %d, want 3", regs[0].Nodes())
	}
	regs[2].Close()
	if !waitFor(time.Second, func() bool { return regs[0].Nodes() == 2 }) {
		t.Fatalf("after one left: nodes %d, want 2", regs[0].Nodes())
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := regs[0].Nodes(); n != 2 {
		t.Errorf("with Redis down: nodes %d, want the last count 2", n)
	}
	// The count sizes the local share.
	l := newLimiter(t, s, resilient.Options{Nodes: regs[0]})
	admitted := 0
	for range 10 {
		if r, _ := l.AllowN(ctx, "k", redlimit.PerHour(7).FixedWindow(), 1); r.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Errorf("local share admitted %d, want ceil(7/2) = 4", admitted)
	}
}

func TestBadInputIsAnError(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, redisStore(t, []string{redistest.Shared(t).Addr()}), resilient.Options{})
	if _, err := l.AllowN(context.Background(), "", redlimit.PerHour(1), 1); !errors.Is(err, redlimit.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := l.AllowN(context.Background(), "k", redlimit.PerHour(1).OnFailure(9), 1); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("bad policy: %v", err)
	}
	if _, err := resilient.New(nil, resilient.Options{}); err == nil {
		t.Error("New(nil): no error")
	}
}

// TestConformance: with the deny cache off, the wrapper answers exactly as
// the store it wraps.
func TestConformance(t *testing.T) {
	redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
		store := redisStore(t, []string{redistest.Shared(t).Addr()}, redisstore.WithClock(now), redisstore.WithTTLMargin(time.Minute))
		return newLimiter(t, store, resilient.Options{DenyCacheSize: -1, Timeout: time.Second})
	})
}
