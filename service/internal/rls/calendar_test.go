package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/redlimit/redlimit/service/internal/config"
)

// billing returns domain billing of one rule, on descriptor tenant.
func billing(t *testing.T, rateLimit string) *config.Domain {
	t.Helper()
	d, err := config.Parse("cal.yaml", []byte("domain: billing\ndescriptors:\n  - key: tenant\n    rate_limit: "+rateLimit+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func berlinZone(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestCalendarDurationUntilReset: a calendar rule's duration_until_reset
// is the time to the next period's midnight in its zone.
func TestCalendarDurationUntilReset(t *testing.T) {
	d := billing(t, "{unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}")
	berlin := berlinZone(t)
	f := newFixture(t, Options{}, d)
	for _, step := range []struct {
		at   time.Time
		sig  string
		left time.Duration
	}{
		{time.Date(2028, 2, 29, 23, 0, 0, 0, berlin), "O:O", time.Hour},
		{time.Date(2028, 2, 29, 23, 30, 0, 0, berlin), "O:O", 30 * time.Minute},
		{time.Date(2028, 2, 29, 23, 45, 0, 0, berlin), "X:X", 15 * time.Minute},
		// March 2028 in Berlin has 31 days less the hour DST takes.
		{time.Date(2028, 3, 1, 0, 0, 0, 0, berlin), "O:O", 31*24*time.Hour - time.Hour},
	} {
		f.clock.Set(step.at)
		resp := f.do(request("billing", desc("tenant", "acme")))
		if got := resp.Statuses[0].DurationUntilReset.AsDuration(); sig(resp) != step.sig || got != step.left {
			t.Fatalf("at %s: %s, duration_until_reset %s; want %s, %s", step.at, sig(resp), got, step.sig, step.left)
		}
	}
}

// TestCalendarOverride: a limit override in the unit of a calendar rule
// counts in the rule's calendar, on the rule's state. Under no-raise, an
// override of the rule's own count is taken, and a lower one too.
func TestCalendarOverride(t *testing.T) {
	d := billing(t, "{unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}")
	berlin := berlinZone(t)
	at := time.Date(2028, 2, 29, 23, 0, 0, 0, berlin)
	left := time.Date(2028, 3, 1, 0, 0, 0, 0, berlin).Sub(at)
	month := func(n uint32) *pb.RateLimitRequest {
		return request("billing", withOverride(desc("tenant", "acme"), n, typepb.RateLimitUnit_MONTH, 0))
	}
	for _, policy := range []OverridePolicy{OverridesAllow, OverridesNoRaise} {
		t.Run(policy.String(), func(t *testing.T) {
			f := newFixture(t, Options{Overrides: policy}, d)
			f.clock.Set(at)
			for _, step := range []struct {
				req *pb.RateLimitRequest
				sig string
			}{
				{request("billing", desc("tenant", "acme")), "O:O"},
				{month(2), "O:O"},
				{month(2), "X:X"},
				{month(1), "X:X"},
				{request("billing", desc("tenant", "acme")), "X:X"},
			} {
				resp, err := f.svc.ShouldRateLimit(context.Background(), step.req)
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Statuses[0].DurationUntilReset.AsDuration(); sig(resp) != step.sig || got != left {
					t.Fatalf("%v: %s, duration_until_reset %s; want %s, %s", step.req.Descriptors[0].Limit, sig(resp), got, step.sig, left)
				}
			}
		})
	}
}

// TestCalendarReload: a reload that changes a calendar rule's zone or
// unit counts afresh, on another state. Back to the old zone, the old
// count is there: nothing was lost.
func TestCalendarReload(t *testing.T) {
	f := newFixture(t, Options{})
	f.clock.Set(time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC))
	for _, step := range []struct{ rule, sig string }{
		{"{unit: month, requests_per_unit: 1, time_zone: Europe/Berlin}", "O:O"},
		{"{unit: month, requests_per_unit: 1, time_zone: Europe/Berlin}", "X:X"},
		{"{unit: month, requests_per_unit: 1, time_zone: UTC}", "O:O"},
		{"{unit: month, requests_per_unit: 1, time_zone: UTC}", "X:X"},
		{"{unit: day, requests_per_unit: 1, time_zone: UTC}", "O:O"},
		{"{unit: month, requests_per_unit: 1}", "O:O"},
		{"{unit: month, requests_per_unit: 1, time_zone: Europe/Berlin}", "X:X"},
	} {
		f.svc.SetConfig(mustConfig(t, billing(t, step.rule)))
		if got := sig(f.do(request("billing", desc("tenant", "acme")))); got != step.sig {
			t.Fatalf("%s: %s, want %s", step.rule, got, step.sig)
		}
	}
}

// TestCalendarDenyAll: a calendar rule of requests_per_unit 0 answers
// duration_until_reset as the time to its next period, as Go's own
// time.Date gives it in the zone: across a DST change and a year's end.
func TestCalendarDenyAll(t *testing.T) {
	berlin := berlinZone(t)
	for _, tc := range []struct {
		unit     string
		at, next time.Time
	}{
		{"month", time.Date(2028, 10, 15, 12, 0, 0, 0, berlin), time.Date(2028, 11, 1, 0, 0, 0, 0, berlin)},
		{"day", time.Date(2028, 3, 26, 1, 30, 0, 0, berlin), time.Date(2028, 3, 27, 0, 0, 0, 0, berlin)},
		{"week", time.Date(2028, 10, 26, 0, 0, 0, 0, berlin), time.Date(2028, 10, 30, 0, 0, 0, 0, berlin)},
		{"year", time.Date(2028, 12, 31, 23, 59, 0, 0, berlin), time.Date(2029, 1, 1, 0, 0, 0, 0, berlin)},
	} {
		d := billing(t, "{unit: "+tc.unit+", requests_per_unit: 0, time_zone: Europe/Berlin}")
		f := newFixture(t, Options{}, d)
		f.clock.Set(tc.at)
		resp := f.do(request("billing", desc("tenant", "acme")))
		if got, want := resp.Statuses[0].DurationUntilReset.AsDuration(), tc.next.Sub(tc.at); sig(resp) != "X:X" || got != want {
			t.Errorf("%s at %s: %s, duration_until_reset %s; want X:X, %s", tc.unit, tc.at, sig(resp), got, want)
		}
	}
}

// calendarZones have DST at midnight (midnight skipped, or twice), half-
// and quarter-hour offsets, a two-hour DST, negative DST and a skipped day.
var calendarZones = []string{"Europe/Berlin", "America/Santiago", "America/Havana", "Asia/Beirut",
	"America/Asuncion", "Australia/Lord_Howe", "Antarctica/Troll", "Asia/Kathmandu", "Pacific/Chatham",
	"America/St_Johns", "Pacific/Apia", "Africa/Casablanca", "Europe/Dublin", "Asia/Gaza", "UTC"}

// nextPeriod is the oracle of TestCalendarResetDifferential: the first
// instant after at whose date in loc is in the next day, ISO week, month
// or year. It scans a 15-minute grid, where every midnight and every
// transition of these zones falls, instead of trusting time.Date.
func nextPeriod(at time.Time, unit string, loc *time.Location) time.Time {
	y, m, d := at.In(loc).Date()
	switch unit {
	case "day":
		d++
	case "week":
		d += 7 - (int(at.In(loc).Weekday())+6)%7
	case "month":
		m, d = m+1, 1
	case "year":
		y, m, d = y+1, 1, 1
	}
	target := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // normalized
	t := target.Add(-48 * time.Hour)
	for {
		ly, lm, ld := t.In(loc).Date()
		if !time.Date(ly, lm, ld, 0, 0, 0, 0, time.UTC).Before(target) {
			return t
		}
		t = t.Add(15 * time.Minute)
	}
}

// TestCalendarResetDifferential: at random instants from 2010 to 2030, a
// calendar rule's duration_until_reset is the time to nextPeriod, in
// zones whose midnights are hard; a deny-all rule's too.
func TestCalendarResetDifferential(t *testing.T) {
	t.Parallel()
	units := []string{"day", "week", "month", "year"}
	var domains []*config.Domain
	for i, z := range calendarZones {
		var b strings.Builder
		fmt.Fprintf(&b, "domain: z%d\ndescriptors:\n", i)
		for _, u := range units {
			fmt.Fprintf(&b, "  - key: %s\n    rate_limit: {unit: %s, requests_per_unit: 5, time_zone: %s}\n", u, u, z)
			fmt.Fprintf(&b, "  - key: %s0\n    rate_limit: {unit: %s, requests_per_unit: 0, time_zone: %s}\n", u, u, z)
		}
		d, err := config.Parse(z+".yaml", []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		domains = append(domains, d)
	}
	f := newFixture(t, Options{}, domains...)
	rng := rand.New(rand.NewPCG(29, 1))
	from, to := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range 3000 {
		zi, unit := rng.IntN(len(calendarZones)), units[rng.IntN(len(units))]
		loc, err := time.LoadLocation(calendarZones[zi])
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMicro(from + rng.Int64N(to-from))
		if i%3 == 0 { // near a period's end: a transition is likelier there
			at = nextPeriod(at, unit, loc).Add(-time.Duration(rng.Int64N(int64(3*time.Hour))) / 1000 * 1000)
		}
		f.clock.Set(at)
		key := unit
		if rng.IntN(4) == 0 {
			key += "0" // deny all: no store is asked
		}
		resp := f.do(request(fmt.Sprintf("z%d", zi), desc(key, fmt.Sprint(i))))
		want := nextPeriod(at, unit, loc).Sub(at)
		if got := resp.Statuses[0].DurationUntilReset.AsDuration(); got != want {
			t.Fatalf("%s %s at %s (%s): duration_until_reset %s, want %s (to %s)",
				key, calendarZones[zi], at.In(loc), at.UTC(), got, want, nextPeriod(at, unit, loc).In(loc))
		}
	}
}
