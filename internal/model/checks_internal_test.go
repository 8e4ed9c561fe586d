package model

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redlimittest"
)

// testRunner returns a runner at T0 whose one store is a second Model.
func testRunner() *runner {
	clock := redlimittest.NewClock(redlimittest.T0)
	env := Env{Clock: clock, Key: func(int) string { return "k" }}
	env.Targets = []Target{{Name: "store", Limiter: New(clock.Now)}}
	r := &runner{env: env, start: redlimittest.T0, states: make(map[stateID]*info), model: New(clock.Now),
		ctx: context.Background(), stats: new(Stats)}
	r.setTime(0)
	return r
}

func TestInvariants(t *testing.T) {
	l := redlimit.PerSecond(10).FixedWindow()
	tb := redlimit.PerSecond(10).TokenBucket(5)
	ok := func(rem int64, reset time.Duration) redlimit.Result {
		return redlimit.Result{Allowed: true, Max: 10, Remaining: rem, ResetAfter: reset}
	}
	deny := func(rem int64, retry, reset time.Duration) redlimit.Result {
		return redlimit.Result{Max: 10, Remaining: rem, RetryAfter: retry, ResetAfter: reset}
	}
	for _, c := range []struct {
		name string
		q    Req
		res  redlimit.Result
		bad  bool
	}{
		{"allowed", Req{0, l, 3, false}, ok(7, time.Second), false},
		{"denied", Req{0, l, 3, false}, deny(2, time.Second, time.Second), false},
		{"never", Req{0, l, 11, false}, deny(10, redlimit.Never, 0), false},
		{"Max not Limit.Max", Req{0, tb, 1, false}, redlimit.Result{Allowed: true, Max: 10, Remaining: 4, ResetAfter: 1}, true},
		{"negative Remaining", Req{0, l, 3, false}, deny(-1, time.Second, time.Second), true},
		{"Remaining above Max", Req{0, l, 3, false}, deny(11, time.Second, time.Second), true},
		{"Remaining above Max - cost", Req{0, l, 3, false}, ok(8, time.Second), true},
		{"allowed above Max", Req{0, l, 11, false}, ok(0, time.Second), true},
		{"allowed with RetryAfter", Req{0, l, 1, false}, redlimit.Result{Allowed: true, Max: 10, Remaining: 9, RetryAfter: 1, ResetAfter: time.Second}, true},
		{"allowed without ResetAfter", Req{0, l, 1, false}, ok(9, 0), true},
		{"denied without RetryAfter", Req{0, l, 3, false}, deny(2, 0, time.Second), true},
		{"Never below Max", Req{0, l, 3, false}, deny(2, redlimit.Never, time.Second), true},
		{"finite above Max", Req{0, l, 11, false}, deny(10, time.Second, 0), true},
		{"denied within Remaining", Req{0, l, 3, false}, deny(3, time.Second, time.Second), true},
		{"full with ResetAfter 0 only", Req{0, l, 3, false}, deny(2, time.Second, 0), true},
		{"fraction of a microsecond", Req{0, l, 1, false}, ok(9, time.Second+1), true},
		{"Source", Req{0, l, 1, false}, redlimit.Result{Allowed: true, Max: 10, Remaining: 9, ResetAfter: time.Second, Source: redlimit.FromLocal}, true},
	} {
		r := testRunner()
		if f := r.invariants(c.name, 0, c.q, c.res); (f != nil) != c.bad {
			t.Errorf("%s: %+v: failure %v, want one: %v", c.name, c.res, f, c.bad)
		}
	}
}

func TestBound(t *testing.T) {
	const s = 1_000_000 // µs
	t0 := redlimittest.T0.UnixMicro()
	for _, c := range []struct {
		name string
		l    redlimit.Limit
		hist []stamp
		bad  bool
	}{
		{"fixed within", redlimit.PerSecond(3).FixedWindow(), []stamp{{t0, 2}, {t0 + s - 1, 1}, {t0 + s, 3}}, false},
		{"fixed over", redlimit.PerSecond(3).FixedWindow(), []stamp{{t0 + s, 1}, {t0, 2}, {t0 + s - 1, 2}}, true},
		{"log within", redlimit.PerSecond(3).SlidingLog(), []stamp{{t0, 2}, {t0 + 1, 1}, {t0 + s, 2}}, false},
		{"log over", redlimit.PerSecond(3).SlidingLog(), []stamp{{t0, 2}, {t0 + s - 1, 2}}, true},
		// An admission before a later one (the clock went back) is
		// checked against every period that holds it.
		{"log over, later first", redlimit.PerSecond(3).SlidingLog(), []stamp{{t0 + s - 1, 2}, {t0, 2}}, true},
		// A bucket's counts are in µs of arrival time: a token is s/10.
		{"bucket within", redlimit.PerSecond(10).TokenBucket(2), []stamp{{t0, s / 5}, {t0 + s/10, s / 10}, {t0 + s/5, s / 10}}, false},
		{"bucket over", redlimit.PerSecond(10).TokenBucket(2), []stamp{{t0, s / 5}, {t0 + s/10, s / 10}, {t0 + s/10 + 1, s / 10}}, true},
	} {
		r := testRunner()
		if f := r.bound(c.name, c.l, c.hist); (f != nil) != c.bad {
			t.Errorf("%s: failure %v, want one: %v", c.name, f, c.bad)
		}
	}
}

// TestRefusalInvariants: a refusal for want of room is a denial with
// nothing remaining, to retry in a millisecond at least.
func TestRefusalInvariants(t *testing.T) {
	l := redlimit.PerSecond(10).FixedWindow()
	for _, c := range []struct {
		name string
		res  redlimit.Result
		bad  bool
	}{
		{"refused", redlimit.Result{Max: 10, RetryAfter: time.Millisecond}, false},
		{"refused for ever", redlimit.Result{Max: 10, RetryAfter: redlimit.Never}, false},
		{"allowed", redlimit.Result{Allowed: true, Max: 10, Remaining: 9, ResetAfter: time.Second}, true},
		{"remaining", redlimit.Result{Max: 10, Remaining: 3, RetryAfter: time.Millisecond}, true},
		{"retry below a millisecond", redlimit.Result{Max: 10, RetryAfter: time.Millisecond - time.Microsecond}, true},
	} {
		r := testRunner()
		if f := r.refusalInvariants(c.name, 0, Req{0, l, 1, false}, c.res); (f != nil) != c.bad {
			t.Errorf("%s: %+v: failure %v, want one: %v", c.name, c.res, f, c.bad)
		}
	}
}

// TestHonest: RetryAfter and ResetAfter are checked at the instants they
// name, and 1 µs before, and a denied AllowAll's results against what
// each store's Peek answers afterwards.
func TestHonest(t *testing.T) {
	l := redlimit.PerSecond(10).FixedWindow()
	t0 := redlimittest.T0.UnixMicro() // a window's start
	honest := redlimit.Result{Max: 10, RetryAfter: time.Second, ResetAfter: time.Second}
	with := func(f func(*redlimit.Result)) redlimit.Result {
		r := honest
		f(&r)
		return r
	}
	for _, c := range []struct {
		name  string
		res   redlimit.Result
		own   bool // check it as a denied AllowAll's result
		check string
	}{
		{"honest", honest, true, ""},
		{"RetryAfter 1µs short", with(func(r *redlimit.Result) { r.RetryAfter -= time.Microsecond }), false, "retry-after"},
		{"RetryAfter 1µs long", with(func(r *redlimit.Result) { r.RetryAfter += time.Microsecond }), false, "retry-after"},
		{"ResetAfter 1µs short", with(func(r *redlimit.Result) { r.ResetAfter -= time.Microsecond }), false, "reset-after"},
		{"ResetAfter 1µs long", with(func(r *redlimit.Result) { r.ResetAfter += time.Microsecond }), false, "reset-after"},
		{"not what Peek answers", with(func(r *redlimit.Result) { r.Remaining = 1 }), true, "atomic"},
	} {
		r := testRunner()
		r.model.CommitAt("k", l, 10, t0)
		r.env.Targets[0].Limiter.(*Model).CommitAt("k", l, 10, t0)
		q := Req{0, l, 1, false}
		var own []redlimit.Result
		if c.own {
			own = []redlimit.Result{c.res}
		}
		f := r.honest(c.name, 0, q, r.info(q), c.res, true, own)
		if got := ""; f != nil {
			got = f.Check
			if got != c.check {
				t.Errorf("%s: failed %q (%s), want %q", c.name, got, f.Msg, c.check)
			}
		} else if c.check != "" {
			t.Errorf("%s: passed, want a %q failure", c.name, c.check)
		}
	}
}
