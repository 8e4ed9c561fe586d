package redlimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestEmissionInterval checks the token bucket's time per token, and the
// refill rates the TokenBucket documentation states.
func TestEmissionInterval(t *testing.T) {
	tests := []struct {
		count  int64
		period time.Duration
		want   int64 // µs
	}{
		{3, time.Second, 333_334},
		{100, time.Minute, 600_000},
		{10_000, time.Second, 100},
		{30_000, time.Second, 34},
		{300_000, time.Second, 4}, // refills at 250,000 per second
		{1_000_000, time.Second, 1},
		{10_000_000, time.Second, 1}, // refills at 1,000,000 per second
	}
	for _, tt := range tests {
		l := redlimit.Limit{Algorithm: redlimit.TokenBucket, Count: tt.count, Period: tt.period, Burst: 1}
		if got := l.EmissionInterval(); got != tt.want {
			t.Errorf("%d per %s: emission interval %d µs, want %d", tt.count, tt.period, got, tt.want)
		}
	}
	// Up to 10,000 per second the bucket refills at least 99% as fast as
	// its rate, and never faster.
	for count := int64(1); count <= 10_000; count++ {
		l := redlimit.Limit{Algorithm: redlimit.TokenBucket, Count: count, Period: time.Second, Burst: 1}
		rate := 1e6 / float64(l.EmissionInterval())
		if rate > float64(count) || rate < 0.99*float64(count) {
			t.Fatalf("%d per second refills at %.1f per second", count, rate)
		}
	}
}

// TestStateID checks what identifies a state: the key, the algorithm and
// the period, whatever the count, burst or failure policy.
func TestStateID(t *testing.T) {
	l := redlimit.PerMinute(10)
	same := []redlimit.Limit{
		redlimit.PerMinute(20),
		l.OnFailure(redlimit.FailClosed),
	}
	for _, m := range same {
		if l.StateID("k") != m.StateID("k") {
			t.Errorf("%v and %v: different states, want one", l, m)
		}
	}
	other := []redlimit.Limit{l.SlidingLog(), redlimit.PerHour(10)}
	for _, m := range other {
		if l.StateID("k") == m.StateID("k") {
			t.Errorf("%v and %v: one state, want two", l, m)
		}
	}
	if l.StateID("k") == l.StateID("j") {
		t.Error("two keys share a state")
	}
	tb := redlimit.PerSecond(5).TokenBucket(5)
	if tb.StateID("k") != redlimit.PerSecond(5).TokenBucket(50).StateID("k") {
		t.Error("token buckets of two bursts: different states, want one")
	}
	r := redlimit.Request{Key: "k", Limit: l, Cost: 1}
	if r.StateID() != (redlimit.StateID{Key: "k", Algorithm: redlimit.SlidingWindow, Period: time.Minute}) {
		t.Errorf("Request.StateID = %+v", r.StateID())
	}
	err := redlimit.ValidateRequests([]redlimit.Request{r, {Key: "k", Limit: l.OnFailure(redlimit.FailOpen).TokenBucket(1).SlidingWindow(), Cost: 1}})
	if !errors.Is(err, redlimit.ErrDuplicateLimit) {
		t.Errorf("two requests of one state: %v, want ErrDuplicateLimit", err)
	}
}

// TestTightest checks the choice of the result closest to running out, and
// the longest wait among denials.
func TestTightest(t *testing.T) {
	ok := func(remaining, limit int64) redlimit.Result {
		return redlimit.Result{Allowed: true, Remaining: remaining, Max: limit}
	}
	deny := func(ra time.Duration) redlimit.Result { return redlimit.Result{RetryAfter: ra, Max: 1} }
	for _, tt := range []struct {
		results []redlimit.Result
		want    int
	}{
		{nil, -1},
		{[]redlimit.Result{ok(5, 10)}, 0},
		{[]redlimit.Result{ok(5, 10), ok(1, 3), ok(40, 100)}, 1},
		{[]redlimit.Result{ok(1, 10), ok(1, 10)}, 0},
		{[]redlimit.Result{ok(0, 10), deny(time.Second), deny(time.Minute), deny(time.Minute)}, 2},
		{[]redlimit.Result{{Source: redlimit.Undecided}, deny(time.Second)}, 1},
	} {
		if got := redlimit.Tightest(tt.results); got != tt.want {
			t.Errorf("Tightest(%+v) = %d, want %d", tt.results, got, tt.want)
		}
		if got := (redlimit.Decision{Results: tt.results}).Tightest(); got != tt.want {
			t.Errorf("Decision.Tightest(%+v) = %d, want %d", tt.results, got, tt.want)
		}
		var want time.Duration
		if tt.want >= 0 && !tt.results[tt.want].Allowed {
			want = tt.results[tt.want].RetryAfter
		}
		if got := redlimit.RetryAfter(tt.results); got != want {
			t.Errorf("RetryAfter(%+v) = %v, want %v", tt.results, got, want)
		}
	}
}

// TestResultDenied checks that only a limit's own denial is one: an
// undecided limit was not asked.
func TestResultDenied(t *testing.T) {
	for _, tt := range []struct {
		res  redlimit.Result
		want bool
	}{
		{redlimit.Result{Allowed: true}, false},
		{redlimit.Result{Allowed: true, Source: redlimit.FromFailOpen}, false},
		{redlimit.Result{RetryAfter: time.Second}, true},
		{redlimit.Result{Source: redlimit.FromFailClosed}, true},
		{redlimit.Result{Source: redlimit.FromDenyCache, RetryAfter: time.Second}, true},
		{redlimit.Result{Source: redlimit.Undecided}, false},
	} {
		if got := tt.res.Denied(); got != tt.want {
			t.Errorf("%+v.Denied() = %v, want %v", tt.res, got, tt.want)
		}
	}
}
