package config

import (
	"errors"
	"testing"

	"github.com/redlimit/redlimit"
)

// TestParseCalendar: time_zone makes a rule's unit a calendar period,
// a fixed window's by default; a calendar on another algorithm, an unknown
// zone or a unit below a day is refused with its sentinel.
func TestParseCalendar(t *testing.T) {
	d, err := Parse("cal.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 1000, time_zone: Europe/Berlin}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin")
	if got := d.Rules()[0].Limit; got != want {
		t.Fatalf("limit %v, want %v", got, want)
	}
	for _, tc := range []struct {
		rule string
		want error
	}{
		{"{unit: month, requests_per_unit: 1, time_zone: Mars/Olympus}", redlimit.ErrUnknownZone},
		{"{unit: week, requests_per_unit: 1, time_zone: UTC, algorithm: sliding_window}", redlimit.ErrCalendarAlgorithm},
		{"{unit: week, requests_per_unit: 1, time_zone: UTC, algorithm: sliding_log}", redlimit.ErrCalendarAlgorithm},
		{"{unit: minute, requests_per_unit: 1, time_zone: UTC}", redlimit.ErrInvalidLimit},
		// An empty zone is a template's unset variable, not a choice of UTC.
		{`{unit: month, requests_per_unit: 1, time_zone: ""}`, redlimit.ErrUnknownZone},
	} {
		_, err := Parse("cal.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: "+tc.rule+"\n"))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.rule, err, tc.want)
		}
	}
}
