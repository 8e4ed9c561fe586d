package rls

import (
	"testing"
	"time"

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
