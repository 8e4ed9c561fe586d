package rls

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// TestCalendarOverrideEdges: an override of several months on a calendar
// rule is a plain window of them, not the calendar. A raise is refused
// under no-raise; a huge count is taken; an unknown unit is refused. None
// fails the next caller. A refusal names the calendar, not its
// longest period.
func TestCalendarOverrideEdges(t *testing.T) {
	d := billing(t, "{unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}")
	at := time.Date(2028, 2, 29, 23, 0, 0, 0, berlinZone(t))
	left := time.Date(2028, 3, 1, 0, 0, 0, 0, berlinZone(t)).Sub(at)
	twoMonths := 60 * 24 * time.Hour
	plain := twoMonths - time.Duration(at.UnixNano()%int64(twoMonths))
	for _, tc := range []struct {
		policy OverridePolicy
		n      uint32
		unit   typepb.RateLimitUnit
		mult   uint32
		reset  time.Duration // 0: refused
		msg    string        // in the refusal
	}{
		{OverridesAllow, 2, typepb.RateLimitUnit_MONTH, 2, plain, ""},
		{OverridesNoRaise, 2, typepb.RateLimitUnit_MONTH, 2, plain, ""},
		{OverridesNoRaise, 3, typepb.RateLimitUnit_MONTH, 0, 0,
			"3 per calendar month Europe/Berlin raises rule billing.tenant (2 per calendar month Europe/Berlin)"},
		{OverridesAllow, math.MaxUint32, typepb.RateLimitUnit_MONTH, 0, left, ""},
		{OverridesAllow, 5, typepb.RateLimitUnit_UNKNOWN, 0, 0, ""},
		{OverridesAllow, math.MaxUint32, typepb.RateLimitUnit(99), 0, 0, ""},
	} {
		f := newFixture(t, Options{Overrides: tc.policy}, d)
		f.clock.Set(at)
		resp, err := f.svc.Decide(context.Background(),
			request("billing", withOverride(desc("tenant", "acme"), tc.n, tc.unit, tc.mult)))
		switch {
		case tc.reset == 0 && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%v %d %s x%d: %v, want ErrInvalidRequest with %q", tc.policy, tc.n, tc.unit, tc.mult, err, tc.msg)
		case tc.reset != 0 && err != nil:
			t.Errorf("%v %d %s x%d: %v", tc.policy, tc.n, tc.unit, tc.mult, err)
		case tc.reset != 0 && (sig(resp) != "O:O" || resp.Statuses[0].DurationUntilReset.AsDuration() != tc.reset):
			t.Errorf("%v %d %s x%d: %s, reset %s; want O:O, %s", tc.policy, tc.n, tc.unit, tc.mult,
				sig(resp), resp.Statuses[0].DurationUntilReset.AsDuration(), tc.reset)
		}
		// The next caller counts on the rule's calendar, untouched.
		resp = f.do(request("billing", desc("tenant", "acme")))
		if got := resp.Statuses[0].DurationUntilReset.AsDuration(); sig(resp) != "O:O" || got != left {
			t.Errorf("%v %d %s x%d, then the rule: %s, reset %s; want O:O, %s", tc.policy, tc.n, tc.unit, tc.mult, sig(resp), got, left)
		}
	}
}

// TestCalendarDenyAllClock: a deny-all calendar rule's reset is positive
// at its period's end, on a clock going back, and on 23- and 25-hour days.
func TestCalendarDenyAllClock(t *testing.T) {
	berlin := berlinZone(t)
	f := newFixture(t, Options{}, billing(t, "{unit: day, requests_per_unit: 0, time_zone: Europe/Berlin}"))
	for _, step := range []struct {
		at   time.Time
		want time.Duration
	}{
		{time.Date(2028, 3, 26, 0, 0, 0, 0, berlin), 23 * time.Hour},
		{time.Date(2028, 10, 29, 0, 0, 0, 0, berlin), 25 * time.Hour},
		{time.Date(2028, 10, 29, 0, 0, 0, 0, berlin).Add(-time.Nanosecond), time.Nanosecond},
		{time.Date(2028, 10, 28, 12, 0, 0, 0, berlin), 12 * time.Hour}, // the clock went back
		{time.Date(2028, 10, 29, 23, 59, 59, 0, berlin), time.Second},
	} {
		f.clock.Set(step.at)
		resp := f.do(request("billing", desc("tenant", "acme")))
		if got := resp.Statuses[0].DurationUntilReset.AsDuration(); sig(resp) != "X:X" || got != step.want {
			t.Errorf("at %s: %s, reset %s; want X:X, %s", step.at, sig(resp), got, step.want)
		}
	}
}
