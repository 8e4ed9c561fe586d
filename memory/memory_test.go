package memory_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

var algorithms = []redlimit.Limit{
	redlimit.PerSecond(1e9).FixedWindow(),
	redlimit.PerSecond(100_000).SlidingLog(),
	redlimit.PerSecond(1e9).SlidingWindow(),
	redlimit.PerSecond(1e9).TokenBucket(1e9),
}

func newStore(t *testing.T, opts ...memory.Option) *memory.Store {
	t.Helper()
	s, err := memory.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAllowAllocatesNothing: once a key is known, deciding allocates nothing.
func TestAllowAllocatesNothing(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now))
	ctx := context.Background()
	for _, l := range algorithms {
		// The sliding log's buffer grows to its working size first.
		for range 1000 {
			clock.Advance(time.Millisecond)
			if _, err := s.AllowN(ctx, "hot", l, 1); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(1000, func() {
			clock.Advance(time.Millisecond)
			if r, err := s.AllowN(ctx, "hot", l, 1); err != nil || !r.Allowed {
				t.Fatalf("%+v, %v", r, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per decision, want 0", l, allocs)
		}
	}
}

// TestMaxKeysBoundsTheStore: a store at its bound of live states holds no
// more, and refuses the new keys.
func TestMaxKeysBoundsTheStore(t *testing.T) {
	s := newStore(t, memory.WithMaxKeys(100))
	ctx := context.Background()
	l := redlimit.PerHour(10).FixedWindow()
	for i := range 2000 {
		if _, err := s.AllowN(ctx, fmt.Sprint("k", i), l, 1); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.States != 100 || st.Refused != 1900 {
		t.Errorf("%+v with WithMaxKeys(100), want 100 states and 1900 refused", st)
	}
}

func TestExpiredStatesAreSwept(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	ctx := context.Background()
	limits := []redlimit.Limit{
		redlimit.PerSecond(10).FixedWindow(),
		redlimit.PerSecond(10).SlidingLog(),
		redlimit.PerSecond(10).SlidingWindow(),
		redlimit.PerSecond(1).TokenBucket(1), // full again a second after each request
	}
	for i := range 1000 {
		for _, l := range limits {
			if _, err := s.AllowN(ctx, fmt.Sprint("k", i), l, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Len() != 4000 {
		t.Fatalf("holds %d states, want 4000", s.Len())
	}
	clock.Advance(999 * time.Millisecond)
	s.Sweep()
	if s.Len() != 4000 {
		t.Fatalf("swept live states: %d left, want 4000", s.Len())
	}
	// The sliding window counter's count weighs in the next window too.
	clock.Advance(time.Second)
	s.Sweep()
	if s.Len() != 1000 {
		t.Fatalf("%d states left a second later, want the 1000 sliding window counters", s.Len())
	}
	clock.Advance(time.Millisecond)
	s.Sweep()
	if n := s.Len(); n != 0 {
		t.Errorf("%d states left after every period passed", n)
	}
}

// TestSweeperStopsOnClose: the background goroutine ends with Close, and
// calls after Close fail with ErrClosed.
func TestSweeperStopsOnClose(t *testing.T) {
	before := quietGoroutines()
	stores := make([]*memory.Store, 20)
	for i := range stores {
		s, err := memory.New(memory.WithSweepInterval(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	if runtime.NumGoroutine() < before+20 {
		t.Fatalf("expected a sweeper per store")
	}
	time.Sleep(5 * time.Millisecond)
	for _, s := range stores {
		s.Close()
		s.Close() // idempotent
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before New", n, before)
	}
	if _, err := stores[0].AllowN(context.Background(), "k", algorithms[0], 1); !errors.Is(err, redlimit.ErrClosed) {
		t.Errorf("AllowN after Close: %v, want ErrClosed", err)
	}
}

// quietGoroutines returns the number of goroutines once the goroutines of
// earlier tests, which may still be exiting, are gone (within a second).
func quietGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			break
		}
		n = m
	}
	return n
}

func TestBadOptions(t *testing.T) {
	for name, o := range map[string]memory.Option{
		"WithMaxKeys(0)":  memory.WithMaxKeys(0),
		"WithMaxBytes(0)": memory.WithMaxBytes(0),
		"WithClock(nil)":  memory.WithClock(nil),
	} {
		if _, err := memory.New(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestExactWhileEvictingAndSweeping: a hot key stays exact while other keys
// churn through a small store and the sweeper runs every millisecond.
func TestExactWhileEvictingAndSweeping(t *testing.T) {
	s := newStore(t, memory.WithMaxKeys(50), memory.WithSweepInterval(time.Millisecond))
	ctx := context.Background()
	hot := redlimit.PerHour(100).SlidingLog()
	churn := redlimit.Per(1, 2*time.Millisecond).FixedWindow()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				if g%2 == 0 {
					if _, err := s.AllowN(ctx, fmt.Sprint("churn", g, "-", i), churn, 1); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				r, err := s.AllowN(ctx, "hot", hot, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 100 {
		t.Errorf("hot key admitted %d, want exactly 100", n)
	}
	if n := s.Len(); n > 50+64 {
		t.Errorf("holds %d states with WithMaxKeys(50)", n)
	}
}

// TestKnownKeyStillValidates: a key with state for an algorithm and period
// takes a shorter path when asked with the same limit again; a limit of the
// same algorithm and period that is not valid, a bad cost, a canceled
// context and a closed store must still fail there, and a valid change of
// count or burst must be decided with the new values.
func TestKnownKeyStillValidates(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bucket := redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1)
	bad := []struct {
		name  string
		valid redlimit.Limit
		limit redlimit.Limit
		cost  int64
		want  error
	}{
		{"zero count", algorithms[0], withCount(algorithms[0], 0), 1, redlimit.ErrInvalidLimit},
		{"negative count", algorithms[2], withCount(algorithms[2], -1), 1, redlimit.ErrInvalidLimit},
		{"count above the maximum", algorithms[0], withCount(algorithms[0], redlimit.MaxCount+1), 1, redlimit.ErrInvalidLimit},
		{"sliding log too long", algorithms[1], withCount(algorithms[1], redlimit.MaxLogCount+1), 1, redlimit.ErrInvalidLimit},
		{"zero burst", bucket, bucket.TokenBucket(0), 1, redlimit.ErrInvalidBurst},
		{"burst too long", bucket, bucket.TokenBucket(redlimit.MaxCount), 1, redlimit.ErrInvalidBurst},
		{"unknown failure policy", algorithms[3], withFailure(algorithms[3], 99), 1, redlimit.ErrInvalidLimit},
		{"fractional microseconds", algorithms[0], withPeriod(algorithms[0], time.Second+1), 1, redlimit.ErrInvalidLimit},
		{"zero cost", algorithms[1], algorithms[1], 0, redlimit.ErrInvalidCost},
		{"huge cost", algorithms[3], algorithms[3], redlimit.MaxCost + 1, redlimit.ErrInvalidCost},
	}
	for _, b := range bad {
		key := "known " + b.name
		if r, err := s.AllowN(ctx, key, b.valid, 1); err != nil || !r.Allowed {
			t.Fatalf("%s: first request: %+v, %v", b.name, r, err)
		}
		if r, err := s.AllowN(ctx, key, b.limit, b.cost); !errors.Is(err, b.want) {
			t.Errorf("%s: %+v, %v, want %v", b.name, r, err, b.want)
		}
	}

	// A new count or burst on a known state is decided with the new value.
	if r, err := s.AllowN(ctx, "count", redlimit.PerSecond(5).FixedWindow(), 3); err != nil || r.Remaining != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, err := s.AllowN(ctx, "count", redlimit.PerSecond(4).FixedWindow(), 1); err != nil || !r.Allowed || r.Remaining != 0 || r.Max != 4 {
		t.Errorf("after a count change: %+v, %v, want allowed with 0 of 4 remaining", r, err)
	}
	if r, err := s.AllowN(ctx, "burst", redlimit.PerSecond(1).TokenBucket(2), 2); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, err := s.AllowN(ctx, "burst", redlimit.PerSecond(1).TokenBucket(3), 1); err != nil || !r.Allowed || r.Max != 3 {
		t.Errorf("after a burst change: %+v, %v, want allowed with a limit of 3", r, err)
	}
	// Another failure policy is the same limit to a store.
	if r, err := s.AllowN(ctx, "count", withFailure(redlimit.PerSecond(4).FixedWindow(), redlimit.FailOpen), 1); err != nil || r.Allowed {
		t.Errorf("with another failure policy: %+v, %v, want denied", r, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.AllowN(cctx, "count", redlimit.PerSecond(4).FixedWindow(), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context on a known key: %v", err)
	}
	s.Close()
	if _, err := s.AllowN(ctx, "count", redlimit.PerSecond(4).FixedWindow(), 1); !errors.Is(err, redlimit.ErrClosed) {
		t.Errorf("closed store, known key: %v, want ErrClosed", err)
	}
	if _, err := s.AllowN(ctx, "count", redlimit.PerSecond(0).FixedWindow(), 1); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("closed store, known key, invalid limit: %v, want ErrInvalidLimit first", err)
	}
}

func withCount(l redlimit.Limit, n int64) redlimit.Limit { l.Count = n; return l }

func withPeriod(l redlimit.Limit, d time.Duration) redlimit.Limit { l.Period = d; return l }

func withFailure(l redlimit.Limit, f redlimit.FailurePolicy) redlimit.Limit { l.Failure = f; return l }
