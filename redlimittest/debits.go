package redlimittest

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

const us = time.Microsecond

// big is a sliding window whose saturation shows in its answers: two debits
// of MaxCost count 1.5 MaxCost, not 2, and the weighting says which.
var big = redlimit.Per(1<<39, time.Second)

// debitScenarios are steps with debits ([redlimit.Request.Debit]). A
// debit is counted whether it fits or not, and takes its key into debt.
// Its Result describes the key after it was counted. The debt drains as
// the algorithm drains any use, and is bounded (see [redlimit.MaxCost]).
var debitScenarios = []scenario{
	{"fixed_window", []step{
		// A debit that does not fit is counted all the same: 5 of 3.
		{0, debit, "a", fixed3, 5, deny(0, redlimit.Never, 1000*ms)},
		{0, peek, "a", fixed3, 1, deny(0, 1000*ms, 1000*ms)},
		{500 * ms, allow, "a", fixed3, 1, deny(0, 500*ms, 500*ms)},
		{500 * ms, debit, "a", fixed3, 1, deny(0, 500*ms, 500*ms)},
		// The debt drains with the window.
		{1000 * ms, allow, "a", fixed3, 3, ok(0, 1000*ms)},
		{1000 * ms, debit, "a", fixed3, 1, deny(0, 1000*ms, 1000*ms)},
		// A debit that fits is counted as an admission is, and allowed.
		{2000 * ms, debit, "a", fixed3, 2, ok(1, 1000*ms)},
		{2000 * ms, allow, "a", fixed3, 1, ok(0, 1000*ms)},
		// A count changed under debt judges the debt by the new count.
		{3000 * ms, debit, "a", fixed3, 5, deny(0, redlimit.Never, 1000*ms)},
		{3000 * ms, peek, "a", redlimit.PerSecond(10).FixedWindow(), 5, ok(0, 1000*ms)},
		{3000 * ms, allow, "a", redlimit.PerSecond(10).FixedWindow(), 6, deny(5, 1000*ms, 1000*ms)},
		{3000 * ms, peek, "a", redlimit.PerSecond(2).FixedWindow(), 1, deny(0, 1000*ms, 1000*ms)},
		// The largest debits saturate at Count + MaxCost, and drain.
		{0, debit, "s", fixed3, redlimit.MaxCost, deny(0, redlimit.Never, 1000*ms)},
		{0, debit, "s", fixed3, redlimit.MaxCost, deny(0, redlimit.Never, 1000*ms)},
		{999 * ms, peek, "s", fixed3, 1, deny(0, 1*ms, 1*ms)},
		{1000 * ms, allow, "s", fixed3, 3, ok(0, 1000*ms)},
	}},
	{"sliding_log", []step{
		{0, debit, "a", log3, 5, deny(0, redlimit.Never, 1000*ms)},
		// The third oldest of the 5 units must expire: all are at 0.
		{500 * ms, allow, "a", log3, 1, deny(0, 500*ms, 500*ms)},
		{1000 * ms, allow, "a", log3, 1, ok(2, 1000*ms)},
		// A debit that fits, then one that does not: 4 units of 3.
		{0, debit, "b", log3, 2, ok(1, 1000*ms)},
		{400 * ms, debit, "b", log3, 2, deny(0, 1000*ms, 1000*ms)},
		{1000 * ms, peek, "b", log3, 1, ok(0, 1000*ms)},
		{1000 * ms, allow, "b", log3, 2, deny(1, 400*ms, 400*ms)},
		// Saturation: the second debit counts 3 (Count + MaxCost in all);
		// whatever the log keeps of the first, the units at 500 ms deny
		// until they expire.
		{0, debit, "s", log3, redlimit.MaxCost, deny(0, redlimit.Never, 1000*ms)},
		{500 * ms, debit, "s", log3, redlimit.MaxCost, deny(0, redlimit.Never, 1000*ms)},
		{1000 * ms, peek, "s", log3, 1, deny(0, 500*ms, 500*ms)},
		{1500 * ms, allow, "s", log3, 3, ok(0, 1000*ms)},
	}},
	{"sliding_window", []step{
		{0, debit, "a", sliding, 15, deny(0, redlimit.Never, 2000*ms)},
		// 15 weighted by the part of the last window still covered: 15 at
		// 1 s, 9 at 1.4 s.
		{1000 * ms, allow, "a", sliding, 1, deny(0, 400*ms, 1000*ms)},
		{1400 * ms, allow, "a", sliding, 1, ok(0, 1600*ms)},
		// Saturation: the second debit counts 2^39 (Count + MaxCost in
		// all), and the window fades from 1.5 MaxCost: a unit passes when
		// (2^39 - 1)/(3*2^39) of the next window remains, floor(333333.3) µs.
		{0, debit, "s", big, redlimit.MaxCost, deny(0, redlimit.Never, 2000*ms)},
		{0, debit, "s", big, redlimit.MaxCost, deny(0, redlimit.Never, 2000*ms)},
		{0, peek, "s", big, 1, deny(0, 1666667*us, 2000*ms)},
	}},
	{"token_bucket", []step{
		{0, debit, "a", bucket, 5, deny(0, redlimit.Never, 500*ms)},
		{100 * ms, allow, "a", bucket, 1, deny(0, 200*ms, 400*ms)},
		{300 * ms, allow, "a", bucket, 1, ok(0, 300*ms)},
		// Saturation: the arrival time goes at most MaxPeriod beyond the
		// burst, and a debit at the bound moves it no further.
		{0, debit, "s", bucket, redlimit.MaxCost, deny(0, redlimit.Never, redlimit.MaxPeriod+300*ms)},
		{0, debit, "s", bucket, 1, deny(0, redlimit.MaxPeriod+100*ms, redlimit.MaxPeriod+300*ms)},
		{redlimit.MaxPeriod, allow, "s", bucket, 1, deny(0, 100*ms, 300*ms)},
		{redlimit.MaxPeriod + 100*ms, allow, "s", bucket, 1, ok(0, 300*ms)},
	}},
}

// runDebits runs the debit steps, debits mixed with admissions in one
// decision, and a flood of debits on one sliding log.
func runDebits(t *testing.T, newStore NewStore) {
	t.Run("Steps", func(t *testing.T) { runScenarios(t, newStore, debitScenarios) })
	t.Run("Mixed", func(t *testing.T) { runDebitMixed(t, newStore) })
	t.Run("LogFlood", func(t *testing.T) { runDebitFlood(t, newStore) })
}

// runDebitMixed: in one decision, an admission that does not fit is not
// counted, while a debit is. A debit that does not fit denies the
// decision, and the admissions in it are not counted.
func runDebitMixed(t *testing.T, newStore NewStore) {
	t.Parallel()
	clock := NewClock(T0)
	s := newStore(t, clock.Now)
	ctx := context.Background()
	sfx := uniq()
	decide := func(what string, reqs []redlimit.Request, allowed bool, want ...redlimit.Result) {
		t.Helper()
		d, err := s.AllowAll(ctx, reqs)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d.Allowed != allowed || len(d.Results) != len(want) {
			t.Fatalf("%s: %+v, want allowed %v", what, d, allowed)
		}
		for i, w := range want {
			w.Max = reqs[i].Limit.Max()
			if d.Results[i] != w {
				t.Errorf("%s: request %d\n got %+v\nwant %+v", what, i, d.Results[i], w)
			}
		}
	}
	peek := func(what, key string, l redlimit.Limit, n int64, want redlimit.Result) {
		t.Helper()
		got, err := s.Peek(ctx, key, l, n)
		want.Max = l.Max()
		if err != nil || got != want {
			t.Errorf("%s: Peek %s cost %d: %+v, %v; want %+v", what, l, n, got, err, want)
		}
	}
	// The debit does not fit: denied, and counted; the admission, which
	// fits, is not counted, and answers as Peek does.
	m := "m" + sfx
	decide("debit over", []redlimit.Request{
		{Key: m, Limit: fixed3, Cost: 1},
		{Key: m, Limit: log3, Cost: 5, Debit: true},
	}, false, ok(2, 1000*ms), deny(0, redlimit.Never, 1000*ms))
	peek("debit over", m, fixed3, 3, ok(0, 1000*ms))
	peek("debit over", m, log3, 1, deny(0, 1000*ms, 1000*ms))

	// The admission can never pass: the debit, which fits, is counted and
	// allowed, and the decision denied.
	n := "n" + sfx
	decide("admission over", []redlimit.Request{
		{Key: n, Limit: fixed3, Cost: 4},
		{Key: n + "2", Limit: log3, Cost: 2, Debit: true},
	}, false, deny(3, redlimit.Never, 0), ok(1, 1000*ms))
	peek("admission over", n, fixed3, 3, ok(0, 1000*ms))
	peek("admission over", n+"2", log3, 2, deny(1, 1000*ms, 1000*ms))

	// Everything fits: all counted.
	clock.Set(T0.Add(100 * ms))
	decide("all fit", []redlimit.Request{
		{Key: n, Limit: fixed3, Cost: 1},
		{Key: n + "2", Limit: log3, Cost: 1, Debit: true},
		{Key: n, Limit: bucket, Cost: 3, Debit: true},
	}, true, ok(2, 900*ms), ok(0, 1000*ms), ok(0, 300*ms))

	// Two debits into debt and an admission: both debits counted.
	decide("two debits over", []redlimit.Request{
		{Key: n, Limit: fixed3, Cost: 1},
		{Key: n + "2", Limit: log3, Cost: 1, Debit: true},
		{Key: n, Limit: bucket, Cost: 2, Debit: true},
	}, false, ok(1, 900*ms), deny(0, 900*ms, 1000*ms), deny(0, 400*ms, 500*ms))
	peek("two debits over", n, fixed3, 2, ok(0, 900*ms))
	peek("two debits over", n, bucket, 1, deny(0, 300*ms, 500*ms))

	// redlimit.Debit is a one-request AllowAll with Debit.
	r, err := redlimit.Debit(ctx, s, n+"3", fixed3, 4)
	if want := deny(0, redlimit.Never, 900*ms); err != nil || r != (redlimit.Result{Max: 3, RetryAfter: want.RetryAfter, ResetAfter: want.ResetAfter}) {
		t.Errorf("redlimit.Debit: %+v, %v; want %+v", r, err, want)
	}
}

// runDebitFlood: a thousand debits of one unit at distinct microseconds,
// on one sliding log of 3 per second. Decisions stay exact to the
// microsecond, whatever the store keeps of the log.
func runDebitFlood(t *testing.T, newStore NewStore) {
	t.Parallel()
	clock := NewClock(T0)
	s := newStore(t, clock.Now)
	ctx := context.Background()
	key := "flood" + uniq()
	for i := range 1000 {
		clock.Set(T0.Add(time.Duration(i) * us))
		r, err := redlimit.Debit(ctx, s, key, log3, 1)
		if err != nil {
			t.Fatalf("debit %d: %v", i, err)
		}
		// The units of the last period are i+1 (0..i), all within it.
		want := redlimit.Result{Allowed: i < 3, Max: 3, Remaining: max(0, 2-int64(i)), ResetAfter: time.Second}
		if i >= 3 {
			// The (i+1-3+1)-th oldest unit, at i-2 µs, must expire.
			want.RetryAfter = time.Second - 2*us
		}
		if r != want {
			t.Fatalf("debit %d: %+v, want %+v", i, r, want)
		}
	}
	// At 1 s + 996 µs the units at 997, 998 and 999 µs are the period's.
	clock.Set(T0.Add(time.Second + 996*us))
	if r, err := s.AllowN(ctx, key, log3, 1); err != nil || r != (redlimit.Result{Max: 3, RetryAfter: us, ResetAfter: 3 * us}) {
		t.Errorf("at 1s+996µs: %+v, %v; want denied for 1µs", r, err)
	}
	clock.Set(T0.Add(time.Second + 997*us))
	if r, err := s.AllowN(ctx, key, log3, 1); err != nil || r != (redlimit.Result{Allowed: true, Max: 3, ResetAfter: time.Second}) {
		t.Errorf("at 1s+997µs: %+v, %v; want allowed, none left", r, err)
	}
}
