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

func TestMaxKeysBoundsTheStore(t *testing.T) {
	s := newStore(t, memory.WithMaxKeys(100))
	ctx := context.Background()
	l := redlimit.PerHour(10).FixedWindow()
	for i := range 10_000 {
		if _, err := s.AllowN(ctx, fmt.Sprint("k", i), l, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n > 100 || n < 50 {
		t.Errorf("holds %d keys with WithMaxKeys(100), want at most 100", n)
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
	before := runtime.NumGoroutine()
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

func TestBadOptions(t *testing.T) {
	for name, o := range map[string]memory.Option{
		"WithMaxKeys(0)": memory.WithMaxKeys(0),
		"WithClock(nil)": memory.WithClock(nil),
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
