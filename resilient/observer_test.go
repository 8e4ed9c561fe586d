package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/resilient"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	decided   map[result]int
	calls     int
	failed    int
	changes   []change
	callError error // the last failed call's error
}

type result struct {
	allowed bool
	src     redlimit.Source
}

type change struct {
	from, to string
	cause    error
}

func newRecorder() *recorder { return &recorder{decided: map[result]int{}} }

func decisionKey(allowed bool, src redlimit.Source) string {
	if allowed {
		return "allowed/" + src.String()
	}
	return "denied/" + src.String()
}

func (r *recorder) Decided(allowed bool, src redlimit.Source) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decided[result{allowed, src}]++
}

func (r *recorder) StoreCalled(_ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if err != nil {
		r.failed++
		r.callError = err
	}
}

func (r *recorder) BreakerChanged(from, to string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, change{from, to, cause})
}

func (r *recorder) snapshot() (decided map[string]int, calls, failed int, changes []change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	decided = map[string]int{}
	for k, v := range r.decided {
		decided[decisionKey(k.allowed, k.src)] = v
	}
	return decided, r.calls, r.failed, append([]change(nil), r.changes...)
}

// TestObserverBreakerCause: the Observer is told each change of the
// breaker, with the store's error that opened it.
func TestObserverBreakerCause(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	var down atomic.Bool
	rec := newRecorder()
	opts := resilientOpts()
	opts.Observer = rec
	l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down}, opts)
	ctx := context.Background()
	limit := redlimit.PerSecond(100)
	down.Store(true)
	l.Allow(ctx, "breaker-cause", limit)
	down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, _, changes := rec.snapshot()
		if l.BreakerState() == "closed" && len(changes) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker %s, changes %v", l.BreakerState(), changes)
		}
		l.Allow(ctx, "breaker-cause", limit)
		time.Sleep(5 * time.Millisecond)
	}
	_, _, _, changes := rec.snapshot()
	if c := changes[0]; c.from != "closed" || c.to != "open" || !errors.Is(c.cause, errDown) {
		t.Fatalf("first change %v, want closed to open caused by %v", c, errDown)
	}
	for _, c := range changes[1:] {
		if c.to != "open" && c.cause != nil {
			t.Errorf("change %v has a cause", c)
		}
	}
}

// TestObserverDecisions: each limit of each decision is reported with the
// allowance and source its Result has, on every path (store, deny cache,
// each failure policy), from many goroutines; store calls are reported
// with their failures, and none while the breaker refuses them.
func TestObserverDecisions(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	var down atomic.Bool
	rec := newRecorder()
	opts := resilientOpts()
	opts.Breaker.CoolDown = time.Hour // open stays open: no store call while down
	opts.Observer = rec
	l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down}, opts)
	ctx := context.Background()
	prefix := fmt.Sprint("obs", rand.Uint64())
	limits := []redlimit.Limit{
		redlimit.PerHour(3),
		withFailure(redlimit.PerHour(3), redlimit.FailOpen),
		withFailure(redlimit.PerHour(3), redlimit.FailClosed),
	}
	var mu sync.Mutex
	want := map[string]int{}
	decide := func(phase string, g int) {
		for i := range 24 {
			reqs := []redlimit.Request{{Key: fmt.Sprint(prefix, phase, g, i%2), Limit: limits[i%len(limits)], Cost: 1}}
			if i%4 == 3 { // a decision of two limits
				reqs = append(reqs, redlimit.Request{Key: fmt.Sprint(prefix, phase, g, "b"), Limit: limits[0], Cost: 1})
			}
			d, err := l.AllowAll(ctx, reqs)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range d.Results {
				want[decisionKey(r.Allowed, r.Source)]++
			}
			mu.Unlock()
		}
	}
	run := func(phase string) {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				decide(phase, g)
			}()
		}
		wg.Wait()
	}
	run("up")
	_, calls, failed, _ := rec.snapshot()
	if calls == 0 || failed != 0 {
		t.Fatalf("store up: %d calls reported, %d failed; want some, none failed", calls, failed)
	}
	down.Store(true)
	run("down")
	got, callsDown, failedDown, changes := rec.snapshot()
	if failedDown == 0 || callsDown-calls != failedDown {
		t.Errorf("store down: %d calls reported, %d failed; want every one failed", callsDown-calls, failedDown)
	}
	if _, _, _, err := rec.callErr(); !errors.Is(err, resilient.ErrStore) || !errors.Is(err, errDown) {
		t.Errorf("failed call reported with %v, want it to wrap ErrStore and the store's error", err)
	}
	if len(changes) == 0 || changes[0].to != "open" {
		t.Errorf("breaker changes %v, want it open", changes)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reported %v, want the results' %v", got, want)
	}
	for _, k := range []string{"allowed/store", "denied/store", "denied/deny_cache", "allowed/local", "denied/local", "allowed/fail_open", "denied/fail_closed"} {
		if want[k] == 0 {
			t.Errorf("no %s result: the test misses a path (%v)", k, want)
		}
	}
}

func (r *recorder) callErr() (int, int, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.failed, len(r.changes), r.callError
}

// TestObserverAllocs: the Observer costs no allocation on a decision the
// store answers, set or not (Options.Observer nil is the common case).
// Not parallel: allocations are counted process-wide.
func TestObserverAllocs(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	lim := redlimit.PerHour(redlimit.MaxCount)
	count := func(obs resilient.Observer) float64 {
		l := newLimiter(t, mem, resilient.Options{Timeout: 5 * time.Second, Observer: obs})
		allow := func() {
			if _, err := l.Allow(context.Background(), "TestObserverAllocs", lim); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			allow()
		}
		n := testing.AllocsPerRun(100, allow)
		for range 2 {
			n = min(n, testing.AllocsPerRun(100, allow))
		}
		return n
	}
	none, observed := count(nil), count(newRecorder())
	t.Logf("AllowN: %v allocations without an Observer, %v with one", none, observed)
	if observed > none+allocNoise {
		t.Errorf("an Observer adds %.1f allocations to AllowN (%v against %v), want none", observed-none, observed, none)
	}
}

func withFailure(l redlimit.Limit, p redlimit.FailurePolicy) redlimit.Limit {
	l.Failure = p
	return l
}
