package redisstore_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// Instants near the bounds the arithmetic must hold at: about today, and
// the year 2100; odd, so that sums above 2^53 µs would have to round.
var (
	today = time.UnixMicro(1_800_000_000_000_001)
	y2100 = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Microsecond)
)

// lastInstant is the latest time the stores are exact at: 2^52 µs since
// the epoch (in 2112), to which a token bucket may add its tolerance of up
// to 2^52 µs and stay within the integers a Lua number holds.
var lastInstant = time.UnixMicro(1 << 52)

// standalone are the deployments on one server, which decide every limit
// of a call atomically, as the memory store does.
var standalone = deployments[:2]

// TestOverflowAtBounds: requests at the largest costs, counts, periods and
// bursts get the same, exact answers from both stores. The first cases
// are those an int64 overflow once let through the memory store.
func TestOverflowAtBounds(t *testing.T) {
	maxPeriodBucket := redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1)
	// The widest bucket: burst * interval just under 2^52 µs.
	wide := redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1 << 52 / redlimit.MaxPeriod.Microseconds())
	type call struct {
		after time.Duration // clock step before the call
		cost  int64
		want  redlimit.Result // Limit is filled in from the limit
	}
	ok := func(rem int64, reset time.Duration) redlimit.Result {
		return redlimit.Result{Allowed: true, Remaining: rem, ResetAfter: reset}
	}
	never := func(rem int64, reset time.Duration) redlimit.Result {
		return redlimit.Result{Remaining: rem, RetryAfter: redlimit.Never, ResetAfter: reset}
	}
	us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
	hour := redlimit.PerHour(100).TokenBucket(1)
	ei := hour.EmissionInterval()
	wideEI, wideTau := wide.EmissionInterval(), wide.Burst*wide.EmissionInterval()
	cases := []struct {
		name  string
		limit redlimit.Limit
		calls []call
	}{
		{"bucket of one per max period, cost 29168", maxPeriodBucket, []call{
			{0, 29_168, never(1, 0)},
			{0, 1, ok(0, redlimit.MaxPeriod)},
			{0, 29_168, never(0, redlimit.MaxPeriod)},
		}},
		{"empty bucket, cost 256204778802", hour, []call{
			{0, 1, ok(0, us(ei))},
			{0, 256_204_778_802, never(0, us(ei))},
			{0, 1, redlimit.Result{RetryAfter: us(ei), ResetAfter: us(ei)}},
		}},
		{"widest bucket, emptied, then costs near its burst", wide, []call{
			{0, wide.Burst, ok(0, us(wideTau))},
			{0, wide.Burst - 1, redlimit.Result{RetryAfter: us(wideTau - wideEI), ResetAfter: us(wideTau)}},
			{0, wide.Burst, redlimit.Result{RetryAfter: us(wideTau), ResetAfter: us(wideTau)}},
			{0, wide.Burst + 1, never(0, us(wideTau))},
			{us(wideEI) - time.Microsecond, 1, redlimit.Result{RetryAfter: time.Microsecond, ResetAfter: us(wideTau-wideEI) + time.Microsecond}},
			{time.Microsecond, 1, ok(0, us(wideTau))},
		}},
		{"largest bucket, largest cost", redlimit.Per(redlimit.MaxCount, redlimit.MinPeriod).TokenBucket(redlimit.MaxCount), []call{
			{0, redlimit.MaxCost, ok(0, us(redlimit.MaxCount))},
			{0, redlimit.MaxCost, redlimit.Result{RetryAfter: us(redlimit.MaxCount), ResetAfter: us(redlimit.MaxCount)}},
		}},
		{"largest fixed window", redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).FixedWindow(), nil},
		{"largest sliding window", redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).SlidingWindow(), nil},
		{"shortest sliding window, largest count", redlimit.Per(redlimit.MaxCount, redlimit.MinPeriod).SlidingWindow(), nil},
		{"largest sliding log", redlimit.Per(redlimit.MaxLogCount, redlimit.MaxPeriod).SlidingLog(), nil},
	}
	for _, d := range standalone {
		for _, start := range []time.Time{today, y2100} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%d/%s", d.name, start.Year(), c.name), func(t *testing.T) {
					t.Parallel()
					w := newTwin(t, d, start)
					for i, k := range c.calls {
						w.clock.Advance(k.after)
						got := w.allow("k", c.limit, k.cost, false)
						want := k.want
						want.Max = c.limit.Max()
						if got != want {
							w.fatalf("call %d: %s cost %d:\n got %+v\nwant %+v", i, c.limit, k.cost, got, want)
						}
					}
					// Every case also runs the same sweep of costs and steps,
					// compared between the stores and checked against the
					// invariants.
					boundSweep(w, "sweep", c.limit)
				})
			}
		}
	}
}

// boundSweep decides costs at and around the limit's bounds on a new key,
// with steps of the clock from a microsecond to two periods (at most seven
// periods in all, and never past lastInstant).
func boundSweep(w *twin, key string, l redlimit.Limit) {
	w.t.Helper()
	max := l.Max()
	costs := []int64{1, 2, max / 2, max - 1, max, max + 1, redlimit.MaxCost}
	var step time.Duration
	for i, cost := range costs {
		if cost < 1 || cost > redlimit.MaxCost {
			continue
		}
		w.allow(key, l, cost, true)
		w.allow(key, l, cost, false)
		w.allow(key, l, 1, false)
		w.allow(key, l, max, true)
		switch i % 4 {
		case 0:
			step = time.Microsecond
		case 1:
			step = l.Period / 3
		case 2:
			step = l.Period - time.Microsecond
		case 3:
			step = 2 * l.Period
		}
		if w.clock.Now().Add(step).After(lastInstant) {
			step = time.Microsecond
		}
		w.clock.Advance(step.Truncate(time.Microsecond))
	}
}

// TestRemainingAfterLimitChange: a key used up under one count or burst
// and then asked under a smaller one has nothing remaining, never less,
// and both stores say so.
func TestRemainingAfterLimitChange(t *testing.T) {
	changes := []struct{ before, after redlimit.Limit }{
		{redlimit.PerMinute(10).FixedWindow(), redlimit.PerMinute(5).FixedWindow()},
		{redlimit.PerMinute(10).SlidingLog(), redlimit.PerMinute(5).SlidingLog()},
		{redlimit.PerMinute(10).SlidingWindow(), redlimit.PerMinute(5).SlidingWindow()},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(10).TokenBucket(5)},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(5).TokenBucket(3)},
		{redlimit.PerMinute(7).TokenBucket(7), redlimit.PerMinute(3).TokenBucket(2)},
		{redlimit.PerMinute(10).TokenBucket(10), redlimit.PerMinute(1).TokenBucket(1)},
	}
	for _, d := range standalone {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			w := newTwin(t, d, today)
			w.loose = true
			for _, c := range changes {
				key := c.before.String() + " then " + c.after.String()
				if r := w.allow(key, c.before, c.before.Max(), false); !r.Allowed {
					t.Fatalf("%s: %+v", key, r)
				}
				for _, cost := range []int64{1, c.after.Max(), c.after.Max() + 1} {
					r := w.allow(key, c.after, cost, false)
					if r.Allowed || r.Remaining != 0 {
						t.Errorf("%s, cost %d: %+v, want denied with 0 remaining", key, cost, r)
					}
				}
				// Then back and forth between the two, a little later each time.
				for i := range 12 {
					w.clock.Advance(c.before.Period / 7)
					l := c.before
					if i%2 == 1 {
						l = c.after
					}
					w.allow(key, l, 1+int64(i%3), false)
				}
			}
		})
	}
}

// TestBoundsExhaustive decides every combination of extreme counts,
// periods, bursts and costs, about today and in 2100, on both stores.
func TestBoundsExhaustive(t *testing.T) {
	counts := []int64{1, 2, 3, redlimit.MaxLogCount, redlimit.MaxCount - 1, redlimit.MaxCount}
	periods := []time.Duration{redlimit.MinPeriod, redlimit.MinPeriod + time.Microsecond, time.Hour + time.Microsecond, redlimit.MaxPeriod}
	bursts := []int64{1, 2, 1000, redlimit.MaxCount}
	var limits []redlimit.Limit
	for _, alg := range []redlimit.Algorithm{redlimit.FixedWindow, redlimit.SlidingLog, redlimit.SlidingWindow, redlimit.TokenBucket} {
		for _, c := range counts {
			for _, p := range periods {
				l := redlimit.Limit{Algorithm: alg, Count: c, Period: p}
				if alg != redlimit.TokenBucket {
					if l.Validate() == nil {
						limits = append(limits, l)
					}
					continue
				}
				for _, b := range bursts {
					if l.Burst = b; l.Validate() == nil {
						limits = append(limits, l)
					}
				}
			}
		}
	}
	for _, d := range standalone {
		for _, start := range []time.Time{today, y2100} {
			t.Run(fmt.Sprintf("%s/%d", d.name, start.Year()), func(t *testing.T) {
				t.Parallel()
				w := newTwin(t, d, start)
				for i, l := range limits {
					// Each limit on its own key, from the same instant.
					w.clock.Set(start)
					boundSweep(w, fmt.Sprint(i), l)
				}
				t.Logf("%d limits, %d calls on each store", len(limits), len(w.history))
			})
		}
	}
}

// TestSlidingWindowExactAtBounds: with counts and periods whose products
// pass 2^53, the sliding window's Remaining is exactly
// L - cur - ceil(prev*(W-elapsed)/W), and RetryAfter is honest: the
// request passes at it and not a microsecond before.
func TestSlidingWindowExactAtBounds(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).SlidingWindow(),
		redlimit.Per(redlimit.MaxCount-1, time.Hour+time.Microsecond).SlidingWindow(),
		redlimit.PerDay(1_000_003).SlidingWindow(),
		redlimit.Per(999_999_937, 7*24*time.Hour+3*time.Microsecond).SlidingWindow(),
	}
	for _, d := range standalone {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			for i, l := range limits {
				W := l.Period.Microseconds()
				base := (today.UnixMicro()/W + 1) * W // the start of a window
				w := newTwin(t, d, time.UnixMicro(base))
				key := fmt.Sprint(i)
				prev := l.Count - int64(i) // the previous window's count
				w.allow(key, l, prev, false)
				var cur int64
				for j, elapsed := range []int64{1, W / 3, W/2 + 1, W - 2} {
					w.clock.Set(time.UnixMicro(base + W + elapsed))
					if j == 1 && w.allow(key, l, int64(i+1), false).Allowed {
						cur = int64(i + 1)
					}
					weighted := new(big.Int).Mul(big.NewInt(prev), big.NewInt(W-elapsed))
					weighted.Add(weighted, big.NewInt(W-1)).Div(weighted, big.NewInt(W))
					left := l.Count - cur - weighted.Int64()
					r := w.allow(key, l, 1, true)
					if left >= 1 && (!r.Allowed || r.Remaining != left-1) || left < 1 && (r.Allowed || r.Remaining != max(0, left)) {
						w.fatalf("%s at elapsed %d: %+v, want %d left before the request", l, elapsed, r, left)
					}
					for _, n := range []int64{1, left + 1, left + 1000, l.Count / 2, l.Count} {
						if n >= 1 && n <= l.Count {
							honestRetry(w, key, l, n)
						}
					}
				}
			}
		})
	}
}

// honestRetry peeks at a request of cost n on key and, if it is denied but
// could pass, peeks again a microsecond before its RetryAfter (denied) and
// at it (allowed), then sets the clock back.
func honestRetry(w *twin, key string, l redlimit.Limit, n int64) {
	w.t.Helper()
	r := w.allow(key, l, n, true)
	if r.Allowed || r.RetryAfter == redlimit.Never {
		return
	}
	now := w.clock.Now()
	defer w.clock.Set(now)
	w.clock.Set(now.Add(r.RetryAfter - time.Microsecond))
	if early := w.allow(key, l, n, true); early.Allowed {
		w.fatalf("%s cost %d: RetryAfter %s, but allowed a microsecond before: %+v", l, n, r.RetryAfter, early)
	}
	w.clock.Set(now.Add(r.RetryAfter))
	if at := w.allow(key, l, n, true); !at.Allowed {
		w.fatalf("%s cost %d: RetryAfter %s, but denied then: %+v", l, n, r.RetryAfter, at)
	}
}
