package rls

import (
	"context"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/redlimit/redlimit/service/internal/config"
)

// TestCalendarDurationUntilReset: a calendar rule's duration_until_reset
// is the time to the next period's midnight in its zone.
func TestCalendarDurationUntilReset(t *testing.T) {
	d, err := config.Parse("cal.yaml", []byte("domain: billing\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
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
	d, err := config.Parse("cal.yaml", []byte("domain: billing\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
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
	rules := func(rule string) *config.Config {
		d, err := config.Parse("cal.yaml", []byte("domain: billing\ndescriptors:\n  - key: tenant\n    rate_limit: "+rule+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return mustConfig(t, d)
	}
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
		f.svc.SetConfig(rules(step.rule))
		if got := sig(f.do(request("billing", desc("tenant", "acme")))); got != step.sig {
			t.Fatalf("%s: %s, want %s", step.rule, got, step.sig)
		}
	}
}

// TestCalendarDenyAll: a calendar rule of requests_per_unit 0 answers
// duration_until_reset as the time to its next period, as Go's own
// time.Date gives it in the zone: across a DST change and a year's end.
func TestCalendarDenyAll(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		unit     string
		at, next time.Time
	}{
		{"month", time.Date(2028, 10, 15, 12, 0, 0, 0, berlin), time.Date(2028, 11, 1, 0, 0, 0, 0, berlin)},
		{"day", time.Date(2028, 3, 26, 1, 30, 0, 0, berlin), time.Date(2028, 3, 27, 0, 0, 0, 0, berlin)},
		{"week", time.Date(2028, 10, 26, 0, 0, 0, 0, berlin), time.Date(2028, 10, 30, 0, 0, 0, 0, berlin)},
		{"year", time.Date(2028, 12, 31, 23, 59, 0, 0, berlin), time.Date(2029, 1, 1, 0, 0, 0, 0, berlin)},
	} {
		d, err := config.Parse("cal.yaml", []byte("domain: billing\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: "+tc.unit+", requests_per_unit: 0, time_zone: Europe/Berlin}\n"))
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, Options{}, d)
		f.clock.Set(tc.at)
		resp := f.do(request("billing", desc("tenant", "acme")))
		if got, want := resp.Statuses[0].DurationUntilReset.AsDuration(), tc.next.Sub(tc.at); sig(resp) != "X:X" || got != want {
			t.Errorf("%s at %s: %s, duration_until_reset %s; want X:X, %s", tc.unit, tc.at, sig(resp), got, want)
		}
	}
}
