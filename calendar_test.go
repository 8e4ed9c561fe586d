package redlimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestCalendarWindow checks calendar windows against their true lengths:
// DST changes both ways, month ends, Feb 29 and year ends.
func TestCalendarWindow(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	ny := mustZone(t, "America/New_York")
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	tests := []struct {
		name       string
		cal        redlimit.Calendar
		t          time.Time
		start, end time.Time
		length     time.Duration
	}{
		{"spring forward day", redlimit.Calendar{Unit: redlimit.Day, Zone: "Europe/Berlin"}, at(berlin, 2026, 3, 29, 12, 0), at(berlin, 2026, 3, 29, 0, 0), at(berlin, 2026, 3, 30, 0, 0), 23 * time.Hour},
		{"fall back day", redlimit.Calendar{Unit: redlimit.Day, Zone: "Europe/Berlin"}, at(berlin, 2026, 10, 25, 2, 30), at(berlin, 2026, 10, 25, 0, 0), at(berlin, 2026, 10, 26, 0, 0), 25 * time.Hour},
		{"day before spring forward", redlimit.Calendar{Unit: redlimit.Day, Zone: "Europe/Berlin"}, at(berlin, 2026, 3, 28, 23, 59), at(berlin, 2026, 3, 28, 0, 0), at(berlin, 2026, 3, 29, 0, 0), 24 * time.Hour},
		{"week with fall back", redlimit.Calendar{Unit: redlimit.Week, Zone: "Europe/Berlin"}, at(berlin, 2026, 10, 25, 23, 0), at(berlin, 2026, 10, 19, 0, 0), at(berlin, 2026, 10, 26, 0, 0), 7*24*time.Hour + time.Hour},
		{"week from Monday", redlimit.Calendar{Unit: redlimit.Week}, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC), 7 * 24 * time.Hour},
		{"week across a year end", redlimit.Calendar{Unit: redlimit.Week}, time.Date(2027, 1, 1, 5, 0, 0, 0, time.UTC), time.Date(2026, 12, 28, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), 7 * 24 * time.Hour},
		{"month with spring forward", redlimit.Calendar{Unit: redlimit.Month, Zone: "Europe/Berlin"}, at(berlin, 2026, 3, 31, 23, 59), at(berlin, 2026, 3, 1, 0, 0), at(berlin, 2026, 4, 1, 0, 0), 31*24*time.Hour - time.Hour},
		{"Feb 29 in a leap year", redlimit.Calendar{Unit: redlimit.Month, Zone: "Europe/Berlin"}, at(berlin, 2028, 2, 29, 23, 59), at(berlin, 2028, 2, 1, 0, 0), at(berlin, 2028, 3, 1, 0, 0), 29 * 24 * time.Hour},
		{"February", redlimit.Calendar{Unit: redlimit.Month}, time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), 28 * 24 * time.Hour},
		{"Feb 29 day", redlimit.Calendar{Unit: redlimit.Day, Zone: "America/New_York"}, at(ny, 2028, 2, 29, 0, 0), at(ny, 2028, 2, 29, 0, 0), at(ny, 2028, 3, 1, 0, 0), 24 * time.Hour},
		{"leap year", redlimit.Calendar{Unit: redlimit.Year, Zone: "Europe/Berlin"}, at(berlin, 2028, 12, 31, 23, 59), at(berlin, 2028, 1, 1, 0, 0), at(berlin, 2029, 1, 1, 0, 0), 366 * 24 * time.Hour},
		{"year end", redlimit.Calendar{Unit: redlimit.Year, Zone: "Europe/Berlin"}, at(berlin, 2027, 1, 1, 0, 0), at(berlin, 2027, 1, 1, 0, 0), at(berlin, 2028, 1, 1, 0, 0), 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := tt.cal.Window(tt.t)
			if !start.Equal(tt.start) || !end.Equal(tt.end) {
				t.Fatalf("Window(%s) = %s .. %s, want %s .. %s", tt.t, start, end, tt.start, tt.end)
			}
			if got := end.Sub(start); got != tt.length {
				t.Fatalf("length %s, want %s", got, tt.length)
			}
			if end.Sub(start) > tt.cal.Unit.Longest() {
				t.Fatalf("length %s above Longest %s", end.Sub(start), tt.cal.Unit.Longest())
			}
			if got := tt.cal.WindowEnd(tt.t.UnixMicro()); got != tt.end.UnixMicro() {
				t.Fatalf("WindowEnd = %d, want %d", got, tt.end.UnixMicro())
			}
		})
	}
}

func TestCalendarValidate(t *testing.T) {
	tests := []struct {
		name string
		l    redlimit.Limit
		want error
	}{
		{"month in Berlin", redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin"), nil},
		{"day in UTC", redlimit.PerCalendar(1, redlimit.Day, ""), nil},
		{"unknown zone", redlimit.PerCalendar(10, redlimit.Month, "Europe/Atlantis"), redlimit.ErrUnknownZone},
		{"host zone", redlimit.PerCalendar(10, redlimit.Month, "Local"), redlimit.ErrUnknownZone},
		{"sliding log", redlimit.PerCalendar(10, redlimit.Month, "").SlidingLog(), redlimit.ErrCalendarAlgorithm},
		{"sliding window", redlimit.PerCalendar(10, redlimit.Month, "").SlidingWindow(), redlimit.ErrCalendarAlgorithm},
		{"token bucket", redlimit.PerCalendar(10, redlimit.Month, "").TokenBucket(5), redlimit.ErrCalendarAlgorithm},
		{"unknown unit", redlimit.Limit{Algorithm: redlimit.FixedWindow, Count: 1, Period: time.Hour, Calendar: redlimit.Calendar{Unit: 9}}, redlimit.ErrInvalidLimit},
		{"period not the unit's", redlimit.Limit{Algorithm: redlimit.FixedWindow, Count: 1, Period: time.Hour, Calendar: redlimit.Calendar{Unit: redlimit.Day}}, redlimit.ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
	if got, want := redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin").String(), "1000/calendar month Europe/Berlin fixed_window"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// TestCalendarWindowsTile walks zones whose midnight can be skipped or
// repeated: every instant lies in one window, and every instant of that
// window names the same window, µs before and after each boundary.
func TestCalendarWindowsTile(t *testing.T) {
	type span struct {
		zone     string
		from, to time.Time
	}
	y := func(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }
	var spans []span
	for _, zone := range []string{"America/Santiago", "America/Havana", "America/Asuncion", "Asia/Beirut", "Australia/Lord_Howe", "Antarctica/Troll", "Europe/Berlin", "UTC"} {
		spans = append(spans, span{zone, y(2025, 1), y(2027, 1)})
	}
	// Midnight twice: DST ended at 01:00, back to 00:00.
	spans = append(spans, span{"Asia/Gaza", y(2021, 10), y(2021, 11)}, span{"Asia/Amman", y(2021, 10), y(2021, 11)})
	for _, sp := range spans {
		from, to := sp.from, sp.to
		for u := redlimit.Day; u <= redlimit.Year; u++ {
			cal := redlimit.Calendar{Unit: u, Zone: sp.zone}
			t.Run(cal.String()+"/"+from.Format("2006"), func(t *testing.T) {
				for at := from; at.Before(to); at = at.Add(37 * time.Minute) {
					start, end := cal.Window(at)
					if at.Before(start) || !at.Before(end) {
						t.Fatalf("Window(%s) = %s .. %s: does not hold it", at, start, end)
					}
					if end.Sub(start) > u.Longest() {
						t.Fatalf("Window(%s) = %s .. %s: above Longest", at, start, end)
					}
					for _, in := range []time.Time{start, end.Add(-time.Microsecond)} {
						if s, e := cal.Window(in); !s.Equal(start) || !e.Equal(end) {
							t.Fatalf("Window(%s) = %s .. %s, but Window(%s) = %s .. %s", at, start, end, in, s, e)
						}
					}
					if s, _ := cal.Window(end); !s.Equal(end) {
						t.Fatalf("window after %s .. %s starts at %s", start, end, s)
					}
				}
			})
		}
	}
}
