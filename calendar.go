package redlimit

import (
	"fmt"
	"sync"
	"time"
)

// A CalendarUnit is a calendar period: a day, an ISO week, a month or a
// year, each starting at midnight in a time zone.
type CalendarUnit uint8

const (
	// Day runs from midnight to midnight: 23 or 25 hours at most DST changes.
	Day CalendarUnit = iota + 1
	// Week is an ISO week, from Monday at midnight.
	Week
	// Month runs from the 1st at midnight: 28 to 31 days.
	Month
	// Year runs from January 1st at midnight: 365 or 366 days.
	Year
)

var unitNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the unit's name, such as "month".
func (u CalendarUnit) String() string {
	if u >= Day && u <= Year {
		return unitNames[u]
	}
	return fmt.Sprintf("CalendarUnit(%d)", uint8(u))
}

// ParseCalendarUnit returns the unit named s ("day", "week", "month" or "year").
func ParseCalendarUnit(s string) (CalendarUnit, error) {
	for u := Day; u <= Year; u++ {
		if unitNames[u] == s {
			return u, nil
		}
	}
	return 0, fmt.Errorf("%w: calendar unit %q is not day, week, month or year", ErrInvalidLimit, s)
}

// Longest returns the longest period of u: a Limit with a Calendar has it
// as its Period. It allows a DST shift of two hours, the largest in the
// time zone database (Antarctica/Troll).
func (u CalendarUnit) Longest() time.Duration {
	const day, shift = 24 * time.Hour, 2 * time.Hour
	switch u {
	case Day:
		return day + shift
	case Week:
		return 7*day + shift
	case Month:
		return 31*day + shift
	case Year:
		return 366*day + shift
	}
	return 0
}

// A Calendar makes a [FixedWindow] limit count in calendar periods of Unit,
// aligned to midnight in the IANA time zone Zone ("" is UTC). The zero
// value is no calendar: windows of Period from the Unix epoch.
type Calendar struct {
	Unit CalendarUnit
	Zone string
}

// Canonical returns c as stores name its state: the zone "UTC" as "".
// Both are UTC, so they share a state.
func (c Calendar) Canonical() Calendar {
	if c.Zone == "UTC" {
		c.Zone = ""
	}
	return c
}

// IsZero reports whether c is no calendar.
func (c Calendar) IsZero() bool { return c == Calendar{} }

// String returns "month Europe/Berlin", or "" for no calendar.
func (c Calendar) String() string {
	if c.IsZero() {
		return ""
	}
	z := c.Zone
	if z == "" {
		z = "UTC"
	}
	return c.Unit.String() + " " + z
}

// Validate reports whether c is a known unit in a zone that loads, with
// an error wrapping [ErrInvalidLimit] or [ErrUnknownZone] if not.
func (c Calendar) Validate() error {
	if c.Unit < Day || c.Unit > Year {
		return fmt.Errorf("%w: unknown calendar unit %d", ErrInvalidLimit, uint8(c.Unit))
	}
	_, err := c.Location()
	return err
}

// zones caches loaded locations by name: loading one reads tzdata.
var zones sync.Map // string -> *time.Location

// Location returns c's time zone, loaded once per name, or an error
// wrapping [ErrUnknownZone].
func (c Calendar) Location() (*time.Location, error) {
	if c.Zone == "" || c.Zone == "UTC" {
		return time.UTC, nil
	}
	if v, ok := zones.Load(c.Zone); ok {
		return v.(*time.Location), nil
	}
	// "Local" depends on the host: a shared limit needs a named zone.
	if c.Zone == "Local" {
		return nil, fmt.Errorf("%w: %q (name the zone, such as Europe/Berlin)", ErrUnknownZone, c.Zone)
	}
	loc, err := time.LoadLocation(c.Zone)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrUnknownZone, c.Zone, err)
	}
	v, _ := zones.LoadOrStore(c.Zone, loc)
	return v.(*time.Location), nil
}

// Window returns the start and end of c's period that holds t, given a
// valid c.
func (c Calendar) Window(t time.Time) (start, end time.Time) {
	loc, err := c.Location()
	if err != nil {
		loc = time.UTC
	}
	t = t.In(loc)
	y, m, d := t.Date()
	switch c.Unit {
	case Week:
		// ISO weeks start on Monday; Go's Weekday has Sunday as 0.
		back := (int(t.Weekday()) + 6) % 7
		return midnight(y, m, d-back, loc), midnight(y, m, d-back+7, loc)
	case Month:
		return midnight(y, m, 1, loc), midnight(y, m+1, 1, loc)
	case Year:
		return midnight(y, 1, 1, loc), midnight(y+1, 1, 1, loc)
	}
	return midnight(y, m, d, loc), midnight(y, m, d+1, loc)
}

// midnight returns the first instant of the day y-m-d in loc. Where DST
// skips midnight, the day starts at the transition; time.Date gives an
// instant in the gap's hour before or after it. Where midnight comes
// twice, time.Date may give the second; the day starts at the first.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if t.Hour() == 0 {
		zs, _ := t.ZoneBounds()
		before := zs.Add(-time.Nanosecond) // the last instant of the zone before
		if by, bm, bd := before.Date(); !zs.IsZero() && by == t.Year() && bm == t.Month() && bd == t.Day() {
			_, off := before.Zone()
			return time.Date(by, bm, bd, 0, 0, 0, 0, time.FixedZone("", off)).In(loc)
		}
		return t
	}
	start, end := t.ZoneBounds()
	if t.Hour() > 12 { // the day before: the transition ends its zone
		return end
	}
	return start
}

// WindowEnd returns the end of c's period that holds the instant now, in
// µs from the Unix epoch: stores name a calendar window by its end.
func (c Calendar) WindowEnd(now int64) int64 {
	_, end := c.Window(time.UnixMicro(now))
	return end.UnixMicro()
}

// PerCalendar returns a [FixedWindow] limit of count requests per calendar
// unit in zone (an IANA name such as "Europe/Berlin"; "" is UTC).
func PerCalendar(count int64, unit CalendarUnit, zone string) Limit {
	return Limit{Algorithm: FixedWindow, Count: count, Period: unit.Longest(), Calendar: Calendar{Unit: unit, Zone: zone}}
}
