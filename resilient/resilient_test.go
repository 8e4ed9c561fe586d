package resilient_test

import (
	"context"
	"errors"
	"fmt"
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
	l := newLimiter(t, store, resilient.Options{Timeout: 5 * time.Second})
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
	// faultRecovery is the fault tests' bound: longer under -race.
	back := time.Now()
	ok := waitFor(faultRecovery+2*time.Second, func() bool {
		r, err := l.AllowN(ctx, "k", lim, 1)
		return err == nil && r.Source == redlimit.FromStore
	})
	took := time.Since(back)
	if !ok || took > faultRecovery {
		t.Errorf("decisions back on Redis after %s (ok=%v), want within %s", took, ok, faultRecovery)
	}
	if l.BreakerState() != "closed" {
		t.Errorf("breaker %s, want closed", l.BreakerState())
	}
}

func TestDeadlineWhenRedisHangs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: 30 * time.Millisecond, Breaker: resilient.BreakerOptions{FailureThreshold: 1000}})
	// The store's timeout is long here, so a cancel comes first however
	// busy the machine.
	patient := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: time.Minute})
	ctx := context.Background()
	lim := redlimit.PerHour(1000).SlidingWindow()
	if _, err := l.AllowN(ctx, "k", lim, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	// A stalled machine may delay any one call: the fastest of several
	// shows the deadline, and none may wait for Redis. The fault tests
	// measure the precise bound (docs/RELIABILITY.md).
	fastest := func(calls int, deadline time.Duration, call func() (redlimit.Result, error)) time.Duration {
		t.Helper()
		best := time.Hour
		for range calls {
			start := time.Now()
			r, err := call()
			took := time.Since(start)
			if err != nil || r.Source != redlimit.FromLocal {
				t.Fatalf("%s deadline: %+v, %v, want the local fallback's answer", deadline, r, err)
			}
			if took > time.Second {
				t.Errorf("a decision took %s with a %s deadline", took, deadline)
			}
			best = min(best, took)
		}
		return best
	}
	if took := fastest(5, 30*time.Millisecond, func() (redlimit.Result, error) { return l.AllowN(ctx, "k", lim, 1) }); took > 30*time.Millisecond+120*time.Millisecond {
		t.Errorf("the fastest of 5 decisions took %s with a 30ms deadline", took)
	}
	// The caller's earlier deadline wins: the policy answers before it.
	if took := fastest(3, 5*time.Millisecond, func() (redlimit.Result, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		return l.AllowN(cctx, "k", lim, 1)
	}); took > 5*time.Millisecond+50*time.Millisecond {
		t.Errorf("the fastest of 3 decisions took %s with a 5ms caller deadline", took)
	}
	// A caller that went away gets its context's error.
	gone, cancelGone := context.WithCancel(ctx)
	time.AfterFunc(5*time.Millisecond, cancelGone)
	if r, err := patient.AllowN(gone, "k", lim, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("caller canceled: %+v, %v, want Canceled", r, err)
	}
}

// TestShortCallerDeadlinesOpenTheBreaker: a store that does not answer
// within the caller's deadline has failed, even when that deadline is
// shorter than Options.Timeout: the policy answers before the deadline, and
// the breaker counts the failure.
func TestShortCallerDeadlinesOpenTheBreaker(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// A store timeout far longer than the callers' deadlines: theirs decide.
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: time.Minute})
	lim := redlimit.PerHour(1000).SlidingWindow().OnFailure(redlimit.FailClosed)
	if _, err := l.Allow(context.Background(), "k", lim); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	for i := range resilient.DefaultFailureThreshold + 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		start := time.Now()
		r, err := l.Allow(ctx, "k", lim)
		took := time.Since(start)
		cancel()
		if err != nil || r.Source != redlimit.FromFailClosed {
			t.Fatalf("call %d: %+v, %v; want fail_closed's answer", i, r, err)
		}
		// The precise bound is the fault tests'; this one holds on a
		// busy machine, and still tells the caller's deadline from the
		// store's timeout.
		if took > time.Second {
			t.Errorf("call %d took %s with a 20ms deadline", i, took)
		}
	}
	if s := l.BreakerState(); s != "open" {
		t.Errorf("breaker %s after %d calls unanswered within their deadline, want open", s, resilient.DefaultFailureThreshold+1)
	}
}

func TestNodeRegistry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := redisStore(t, []string{srv.Addr()})
	ctx := context.Background()
	// Beats 250 ms apart, live for 750 ms: a beat delayed 200 ms under
	// -race on a busy machine drops no node (at 50 ms, it could).
	opts := redisstore.RegistryOptions{Interval: 250 * time.Millisecond}
	var regs []*redisstore.Registry
	for range 3 {
		r, err := s.Register(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
		defer r.Close()
	}
	if !waitFor(5*time.Second, func() bool { return regs[0].Nodes() == 3 }) {
		t.Fatalf("nodes %d, want 3", regs[0].Nodes())
	}
	regs[2].Close()
	if !waitFor(5*time.Second, func() bool { return regs[0].Nodes() == 2 }) {
		t.Fatalf("after one left: nodes %d, want 2", regs[0].Nodes())
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * opts.Interval) // beats that fail
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
		return newLimiter(t, store, resilient.Options{DenyCache: resilient.DenyCacheOptions{Size: -1}, Timeout: time.Second})
	})
}

// TestDenyCacheFollowsTheState: the state in the store is shared by key,
// algorithm and period, so a Reset of a limit that differs only in Count or
// Failure drops the cached denial, and a looser Count is asked of the store.
func TestDenyCacheFollowsTheState(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, redisStore(t, []string{redistest.Shared(t).Addr()}), resilient.Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	lim := redlimit.PerHour(3).SlidingLog()
	exhaust := func(key string) {
		t.Helper()
		for range 4 {
			if _, err := l.Allow(ctx, key, lim); err != nil {
				t.Fatal(err)
			}
		}
		if r, _ := l.Allow(ctx, key, lim); r.Allowed || r.Source != redlimit.FromDenyCache {
			t.Fatalf("%s: %+v, want a cached denial", key, r)
		}
	}
	for name, other := range map[string]redlimit.Limit{
		"failure": lim.OnFailure(redlimit.FailOpen),
		"count":   redlimit.PerHour(5).SlidingLog(),
	} {
		exhaust(name)
		if err := l.Reset(ctx, name, other); err != nil {
			t.Fatal(err)
		}
		if p, _ := l.Peek(ctx, name, lim, 1); !p.Allowed {
			t.Fatalf("%s: Peek after Reset: %+v", name, p)
		}
		if r, _ := l.Allow(ctx, name, lim); !r.Allowed || r.Source != redlimit.FromStore {
			t.Errorf("Reset with another %s: Allow says %+v, want the store's allowance", name, r)
		}
	}
	// A denial cached for Count 3 does not answer for Count 10 of the same
	// state; it does for Count 3 under another failure policy, which is not
	// part of the state.
	exhaust("looser")
	if r, _ := l.Allow(ctx, "looser", redlimit.PerHour(10).SlidingLog()); !r.Allowed || r.Source != redlimit.FromStore {
		t.Errorf("a looser Count: %+v, want the store's allowance", r)
	}
	exhaust("policy")
	if r, _ := l.Allow(ctx, "policy", lim.OnFailure(redlimit.FailClosed)); r.Allowed || r.Source != redlimit.FromDenyCache {
		t.Errorf("the same state with another policy: %+v, want the cached denial", r)
	}
}

// TestDenyCacheSizeIsATotal: DenyCache.Size bounds the entries of the whole
// cache, however small.
func TestDenyCacheSizeIsATotal(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 5, 17} {
		l := newLimiter(t, redisStore(t, []string{redistest.Shared(t).Addr()}), resilient.Options{DenyCache: resilient.DenyCacheOptions{Size: size}, Timeout: 5 * time.Second})
		ctx := context.Background()
		lim := redlimit.PerHour(1).FixedWindow()
		const keys = 40
		for i := range keys {
			for range 2 {
				if _, err := l.Allow(ctx, fmt.Sprint("k", i), lim); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n := resilient.DenyCacheLen(l); n > size || n == 0 {
			t.Errorf("DenyCacheSize %d: %d entries", size, n)
		}
	}
}

// TestProbeIsJudgedByTheStoreTimeout: the half-open breaker's probe, made
// by a caller whose deadline is shorter than the store's answer, still
// closes the breaker when the store answers within Options.Timeout; the
// caller gets its policy's answer in time.
func TestProbeIsJudgedByTheStoreTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	// A store timeout far above the probe's 1s, so that a loaded machine
	// cannot push the probe's answer past it.
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: 3 * time.Second, Breaker: resilient.BreakerOptions{CoolDown: 50 * time.Millisecond}})
	lim := redlimit.PerHour(1000).SlidingWindow().OnFailure(redlimit.FailClosed)
	short := func() (redlimit.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return l.Allow(ctx, "k", lim)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	for range resilient.DefaultFailureThreshold {
		if _, err := short(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if s := l.BreakerState(); s != "open" {
		t.Fatalf("breaker %s, want open", s)
	}
	time.Sleep(100 * time.Millisecond) // the cool-down
	// Redis answers the probe within 1s: past the caller's deadline,
	// within the store's timeout. The probe comes 300 ms after the sleep
	// is sent: a busy machine may take tens of ms to send it.
	slept := make(chan error, 1)
	go func() { _, err := srv.Do("DEBUG", "SLEEP", "1"); slept <- err }()
	time.Sleep(300 * time.Millisecond)
	if r, err := short(); err != nil || r.Source != redlimit.FromFailClosed {
		t.Fatalf("the probe's caller: %+v, %v; want fail_closed's answer", r, err)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return l.BreakerState() == "closed" }) {
		t.Errorf("breaker %s after the probe's store answered within its timeout, want closed", l.BreakerState())
	}
}

// TestFallbackStartsFromWhatTheStoreSaid: when Redis goes away, a key's
// local fallback starts from what Redis last said to this node, divided
// among the live nodes, not from a full share; a key that was exhausted
// stays exhausted. (The deny cache is off: it would answer the exhausted
// key by itself.)
func TestFallbackStartsFromWhatTheStoreSaid(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Nodes: fixedNodes(4), DenyCache: resilient.DenyCacheOptions{Size: -1}, Timeout: 5 * time.Second})
	ctx := context.Background()
	limits := []redlimit.Limit{
		redlimit.PerHour(100).SlidingWindow(),
		redlimit.PerHour(100).FixedWindow(),
		redlimit.PerHour(100).SlidingLog(),
		redlimit.PerHour(100).TokenBucket(100), // one token every 36 s
	}
	for _, lim := range limits {
		for key, cost := range map[string]int64{"near": 92, "looser": 92, "spent": 100, "spent-denied": 100} {
			if r, err := l.AllowN(ctx, key, lim, cost); err != nil || !r.Allowed {
				t.Fatalf("%s %s: %+v, %v", key, lim, r, err)
			}
		}
		if r, _ := l.Allow(ctx, "spent-denied", lim); r.Allowed || r.Source != redlimit.FromStore {
			t.Fatalf("spent-denied %s: %+v, want the store's denial", lim, r)
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// With 8 left, each of 4 nodes takes 2; with none, none; a key never
	// seen gets the share, 25; a looser Count of the same state starts
	// from what was consumed: 200 - 92 = 108 left, 27 each.
	for _, lim := range limits {
		looser := lim
		looser.Count, looser.Burst = 200, min(looser.Burst*2, 200)
		for _, c := range []struct {
			key  string
			lim  redlimit.Limit
			want int
		}{{"near", lim, 2}, {"spent", lim, 0}, {"spent-denied", lim, 0}, {"fresh", lim, 25}, {"looser", looser, 27}} {
			admitted := 0
			for range 60 {
				r, err := l.Allow(ctx, c.key, c.lim)
				if err != nil || r.Source != redlimit.FromLocal {
					t.Fatalf("%s %s: %+v, %v", c.key, c.lim, r, err)
				}
				if r.Allowed {
					admitted++
				}
			}
			if admitted != c.want {
				t.Errorf("%s %s: the local fallback admitted %d, want %d", c.key, c.lim, admitted, c.want)
			}
		}
	}
}

// TestLastSeenIsBounded: LastSeenSize bounds the states remembered.
func TestLastSeenIsBounded(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, redisStore(t, []string{redistest.Shared(t).Addr()}), resilient.Options{Fallback: resilient.FallbackOptions{LastSeenSize: 10}, Timeout: 5 * time.Second})
	for i := range 100 {
		if _, err := l.Allow(context.Background(), fmt.Sprint("k", i), redlimit.PerHour(5)); err != nil {
			t.Fatal(err)
		}
	}
	if n := resilient.LastSeenLen(l); n > 10 || n == 0 {
		t.Errorf("LastSeenSize 10: %d states remembered", n)
	}
}

// TestFallbackForgetsWhatHasDrained: what the store said no longer holds
// once that state would have drained: the local fallback then starts from
// the whole share.
func TestFallbackForgetsWhatHasDrained(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Nodes: fixedNodes(4), DenyCache: resilient.DenyCacheOptions{Size: -1}, Timeout: 5 * time.Second})
	ctx := context.Background()
	lim := redlimit.Per(20, 300*time.Millisecond).FixedWindow()
	if r, err := l.AllowN(ctx, "k", lim, 20); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond) // past the window's end
	// The ten calls within one window of the local fallback, whose windows
	// start at multiples of the period: from just after a window's start
	// (on a busy machine they took longer than what was left of one, and
	// the next window admitted a share again).
	time.Sleep(lim.Period - time.Duration(time.Now().UnixNano()%int64(lim.Period)) + 5*time.Millisecond)
	// A stalled machine may still cross into the next window: each
	// window that saw calls admits its share, or every call if fewer.
	type window struct{ calls, admitted int }
	windows := map[int64]*window{}
	for range 10 {
		r, err := l.Allow(ctx, "k", lim)
		if err != nil || r.Source != redlimit.FromLocal {
			t.Fatalf("after the window: %+v, %v; want the local fallback's answer", r, err)
		}
		// Windows are aligned to the Unix epoch; the deciding window
		// ends ResetAfter from now.
		end := time.Now().Add(r.ResetAfter).UnixNano()
		i := (end + int64(lim.Period)/2) / int64(lim.Period)
		w := windows[i]
		if w == nil {
			w = &window{}
			windows[i] = w
		}
		w.calls++
		if r.Allowed {
			w.admitted++
		}
	}
	for i, w := range windows {
		if want := min(w.calls, 5); w.admitted != want {
			t.Errorf("after the window: the local fallback admitted %d of %d calls in window %d, want %d of the share 5", w.admitted, w.calls, i, want)
		}
	}
}
