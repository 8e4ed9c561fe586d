package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestTokenBucketHugeCost: a cost whose emission time overflows int64 can
// never pass a bucket it exceeds, and leaves the bucket as it was.
func TestTokenBucketHugeCost(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now))
	ctx := context.Background()
	for _, c := range []struct {
		limit redlimit.Limit
		cost  int64
	}{
		{redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1), 29_168},
		{redlimit.PerHour(100).TokenBucket(1), 256_204_778_802},
		{redlimit.PerHour(1).TokenBucket(1), redlimit.MaxCost},
		{redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount), redlimit.MaxCost},
	} {
		key := c.limit.String()
		r, err := s.AllowN(ctx, key, c.limit, c.cost)
		if err != nil {
			t.Fatal(err)
		}
		if c.cost > c.limit.Burst {
			want := redlimit.Result{Max: c.limit.Burst, Remaining: c.limit.Burst, RetryAfter: redlimit.Never}
			if r != want {
				t.Errorf("%s cost %d: %+v, want %+v", c.limit, c.cost, r, want)
			}
		} else if !r.Allowed || r.Remaining != 0 {
			t.Errorf("%s cost %d: %+v, want allowed with nothing left", c.limit, c.cost, r)
		}
		// The bucket was full and stays so for a denial: a cost of 1 passes
		// and leaves burst-1.
		if c.cost > c.limit.Burst {
			if r, err := s.AllowN(ctx, key, c.limit, 1); err != nil || !r.Allowed || r.Remaining != c.limit.Burst-1 {
				t.Errorf("%s: a cost of 1 after the huge one: %+v, %v", c.limit, r, err)
			}
			if r, err := s.AllowN(ctx, key, c.limit, c.cost); err != nil || r.Allowed || r.RetryAfter != redlimit.Never || r.Remaining != c.limit.Burst-1 {
				t.Errorf("%s: the huge cost on a used bucket: %+v, %v", c.limit, r, err)
			}
		}
	}
}

// TestRemainingAfterLimitChange: a key used up under one count or burst and
// then asked with a smaller one has nothing remaining, never less.
func TestRemainingAfterLimitChange(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now))
	ctx := context.Background()
	for _, c := range []struct{ before, after redlimit.Limit }{
		{redlimit.PerMinute(10).FixedWindow(), redlimit.PerMinute(5).FixedWindow()},
		{redlimit.PerMinute(10).SlidingLog(), redlimit.PerMinute(5).SlidingLog()},
		{redlimit.PerMinute(10).SlidingWindow(), redlimit.PerMinute(5).SlidingWindow()},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(10).TokenBucket(5)},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(5).TokenBucket(5)},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(1).TokenBucket(1)},
	} {
		key := c.before.String() + " then " + c.after.String()
		if r, err := s.AllowN(ctx, key, c.before, c.before.Max()); err != nil || !r.Allowed {
			t.Fatalf("%s: %+v, %v", key, r, err)
		}
		for _, cost := range []int64{1, c.after.Max(), c.after.Max() + 1} {
			r, err := s.AllowN(ctx, key, c.after, cost)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed || r.Remaining != 0 || r.Max != c.after.Max() {
				t.Errorf("%s, cost %d: %+v, want denied with 0 of %d remaining", key, cost, r, c.after.Max())
			}
		}
	}
}

// TestRemainingStaysWithinLimit: whatever was consumed under earlier
// limits, Remaining is in [0, Max].
func TestRemainingStaysWithinLimit(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now))
	ctx := context.Background()
	counts := []int64{1, 2, 3, 7, 10}
	for _, alg := range []redlimit.Algorithm{redlimit.FixedWindow, redlimit.SlidingLog, redlimit.SlidingWindow, redlimit.TokenBucket} {
		for i := range 400 {
			l := redlimit.Limit{Algorithm: alg, Count: counts[i%len(counts)], Period: time.Second}
			if alg == redlimit.TokenBucket {
				l.Burst = counts[(i/len(counts))%len(counts)]
			}
			cost := 1 + int64(i%3)
			r, err := s.AllowN(ctx, alg.String(), l, cost)
			if err != nil {
				t.Fatal(err)
			}
			if r.Remaining < 0 || r.Remaining > r.Max {
				t.Fatalf("%s cost %d (step %d): Remaining %d outside [0, %d]", l, cost, i, r.Remaining, r.Max)
			}
			clock.Advance(time.Duration(i%7) * 13 * time.Millisecond)
		}
	}
}

// TestClockBackKeepsLaterWindow: a request at an instant before the key's
// latest window (a clock that went back) is counted in that window, so
// returning to it finds its count: a window never admits above its count.
func TestClockBackKeepsLaterWindow(t *testing.T) {
	ctx := context.Background()
	for _, l := range []redlimit.Limit{
		redlimit.Per(5, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(5, 100*time.Millisecond).SlidingWindow(),
	} {
		clock := redlimittest.NewClock(redlimittest.T0.Add(150 * time.Millisecond)) // in the second window
		s := newStore(t, memory.WithClock(clock.Now))
		if r, err := s.AllowN(ctx, "k", l, 5); err != nil || !r.Allowed {
			t.Fatalf("%s: %+v, %v", l, r, err)
		}
		clock.Set(redlimittest.T0.Add(50 * time.Millisecond)) // back in the first window
		r, err := s.AllowN(ctx, "k", l, 1)
		if err != nil || r.Allowed || r.Remaining != 0 {
			t.Errorf("%s, back in the first window: %+v, %v; want denied, counted in the second", l, r, err)
		}
		admitted := int64(5)
		if r.Allowed {
			admitted++
		}
		clock.Set(redlimittest.T0.Add(160 * time.Millisecond)) // the second window again
		for range 5 {
			if r, err := s.AllowN(ctx, "k", l, 1); err != nil {
				t.Fatal(err)
			} else if r.Allowed {
				admitted++
			}
		}
		if admitted > 5 {
			t.Errorf("%s: %d admitted in the second window", l, admitted)
		}
	}
}
