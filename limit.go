package redlimit

import (
	"fmt"
	"time"
)

// Bounds on a [Limit] and a cost, chosen so that every quantity a store
// computes stays exact in a Lua number (a float64) on Redis.
const (
	// MaxCount is the largest Count (and Burst) a Limit may have.
	MaxCount = 1 << 40
	// MaxLogCount is the largest Count of a [SlidingLog] limit, which keeps
	// an entry per instant with admitted requests, up to Count of them: use
	// [SlidingWindow] above it.
	MaxLogCount = 100_000
	// MaxCost is the largest cost of one request. It also bounds the debt a
	// key can carry ([Request.Debit]). A debit takes a key at most MaxCost
	// beyond its limit. It counts only the part of its cost within that
	// bound, judged by the request's Limit:
	//   - fixed_window, sliding_window: a window's count never goes above
	//     Count + MaxCost;
	//   - sliding_log: the units of the period never go above
	//     Count + MaxCost. A debit beyond Count keeps the log bounded, at
	//     most 2*Count + 3 entries, with decisions unchanged;
	//   - token_bucket: the theoretical arrival time is never moved back.
	//     It never goes past now + Burst*EmissionInterval + MaxPeriod: at
	//     most MaxPeriod of drain beyond the burst. Nor does it go past
	//     2^53 µs after the Unix epoch (the year 2255).
	MaxCost = MaxCount
	// MinPeriod is the shortest Period: Redis key TTLs are kept in milliseconds.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest Period, ten years of 366 days.
	MaxPeriod = 3660 * 24 * time.Hour
	// maxTolerance bounds a token bucket's burst * emission interval, in microseconds.
	maxTolerance = 1 << 52
)

// A Limit says how many requests a key may make: Count per Period, counted by
// Algorithm. Burst applies to [TokenBucket] only.
//
// A Limit is a small value, compared with ==. Build one with [PerSecond],
// [PerMinute], [PerHour], [PerDay] or [Per], then pick the algorithm:
//
//	redlimit.PerMinute(100).SlidingLog()
//	redlimit.PerSecond(10).TokenBucket(20)
//
// Stores keep state per [StateID] (key, algorithm, period, calendar):
// changing Count or Burst keeps what was already consumed, changing the
// algorithm, period or calendar starts afresh. A calendar's zone "" and
// "UTC" are one.
type Limit struct {
	// Algorithm counts the requests. The zero value is invalid.
	Algorithm Algorithm
	// Count is how many requests (units of cost) Period allows, 1..MaxCount.
	Count int64
	// Period is the window, MinPeriod..MaxPeriod, a whole number of microseconds.
	Period time.Duration
	// Burst is the token bucket's capacity: how many requests may pass at
	// once after a quiet spell, 1..MaxCount. Ignored by the other algorithms.
	// The token bucket refills one token every Period/Count.
	Burst int64
	// Calendar, when set, aligns a FixedWindow's windows to calendar
	// periods in a time zone; Period must then be Calendar.Unit.Longest()
	// ([PerCalendar] sets both).
	Calendar Calendar
	// Failure says what a resilient limiter answers when the store cannot
	// be asked; the zero value is [FailLocal]. Stores ignore it, and it is
	// not part of the state's identity ([StateID]).
	Failure FailurePolicy
}

// StateID identifies the state a store keeps: what a key has consumed under
// one algorithm and period. Limits that differ only in Count, Burst or
// Failure share a state; two requests of one decision may not
// ([ErrDuplicateLimit]). Every store keeps one state per StateID, and
// whatever remembers something per state (the resilient limiter's deny
// cache, say) keys it by StateID.
type StateID struct {
	Key       string
	Algorithm Algorithm
	Period    time.Duration
	Calendar  Calendar
}

// StateID returns the identity of the state key has under l.
func (l Limit) StateID(key string) StateID {
	return StateID{Key: key, Algorithm: l.Algorithm, Period: l.Period, Calendar: l.Calendar.Canonical()}
}

// Per returns a limit of count requests per period, counted by [SlidingWindow].
func Per(count int64, period time.Duration) Limit {
	return Limit{Algorithm: SlidingWindow, Count: count, Period: period}
}

// PerSecond returns a limit of count requests per second, counted by [SlidingWindow].
func PerSecond(count int64) Limit { return Per(count, time.Second) }

// PerMinute returns a limit of count requests per minute, counted by [SlidingWindow].
func PerMinute(count int64) Limit { return Per(count, time.Minute) }

// PerHour returns a limit of count requests per hour, counted by [SlidingWindow].
func PerHour(count int64) Limit { return Per(count, time.Hour) }

// PerDay returns a limit of count requests per day, counted by [SlidingWindow].
func PerDay(count int64) Limit { return Per(count, 24*time.Hour) }

// FixedWindow returns l counted by [FixedWindow].
func (l Limit) FixedWindow() Limit { l.Algorithm = FixedWindow; l.Burst = 0; return l }

// SlidingLog returns l counted by [SlidingLog].
func (l Limit) SlidingLog() Limit { l.Algorithm = SlidingLog; l.Burst = 0; return l }

// SlidingWindow returns l counted by [SlidingWindow].
func (l Limit) SlidingWindow() Limit { l.Algorithm = SlidingWindow; l.Burst = 0; return l }

// TokenBucket returns l counted by [TokenBucket] with the given burst:
// Count tokens are added per Period, and at most burst are held.
func (l Limit) TokenBucket(burst int64) Limit {
	l.Algorithm = TokenBucket
	l.Burst = burst
	return l
}

// Max returns the most cost that can pass at once: Burst for a token bucket,
// Count otherwise.
func (l Limit) Max() int64 {
	if l.Algorithm == TokenBucket {
		return l.Burst
	}
	return l.Count
}

// String returns a short description such as "100/1m sliding_log" or
// "10/1s token_bucket burst 20".
func (l Limit) String() string {
	if !l.Calendar.IsZero() {
		return fmt.Sprintf("%d/calendar %s %s", l.Count, l.Calendar, l.Algorithm)
	}
	s := fmt.Sprintf("%d/%s %s", l.Count, shortDuration(l.Period), l.Algorithm)
	if l.Algorithm == TokenBucket {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	return s
}

// Validate reports whether l can be used, with an error wrapping
// [ErrUnknownAlgorithm], [ErrInvalidLimit], [ErrInvalidBurst],
// [ErrCalendarAlgorithm] or [ErrUnknownZone] if not.
func (l Limit) Validate() error {
	if !l.Algorithm.Valid() {
		return fmt.Errorf("%w: %d", ErrUnknownAlgorithm, uint8(l.Algorithm))
	}
	if l.Failure > FailClosed {
		return fmt.Errorf("%w: unknown failure policy %d", ErrInvalidLimit, uint8(l.Failure))
	}
	if l.Count < 1 || l.Count > MaxCount {
		return fmt.Errorf("%w: count %d is not in 1..%d", ErrInvalidLimit, l.Count, int64(MaxCount))
	}
	if l.Period < MinPeriod || l.Period > MaxPeriod {
		return fmt.Errorf("%w: period %s is not in %s..%s", ErrInvalidLimit, l.Period, MinPeriod, MaxPeriod)
	}
	if !l.Calendar.IsZero() {
		if l.Algorithm != FixedWindow {
			return fmt.Errorf("%w: %s has no windows to align (use fixed_window)", ErrCalendarAlgorithm, l.Algorithm)
		}
		if err := l.Calendar.Validate(); err != nil {
			return err
		}
		if l.Period != l.Calendar.Unit.Longest() {
			return fmt.Errorf("%w: a calendar %s's period is %s, not %s (use PerCalendar)", ErrInvalidLimit, l.Calendar.Unit, l.Calendar.Unit.Longest(), l.Period)
		}
	}
	if l.Algorithm == SlidingLog && l.Count > MaxLogCount {
		return fmt.Errorf("%w: a sliding log keeps one entry per request: count %d is above %d (use sliding_window)", ErrInvalidLimit, l.Count, MaxLogCount)
	}
	if l.Period%time.Microsecond != 0 {
		return fmt.Errorf("%w: period %s is not a whole number of microseconds", ErrInvalidLimit, l.Period)
	}
	if l.Algorithm == TokenBucket {
		if l.Burst < 1 || l.Burst > MaxCount {
			return fmt.Errorf("%w: burst %d is not in 1..%d", ErrInvalidBurst, l.Burst, int64(MaxCount))
		}
		if float64(l.Burst)*float64(l.EmissionInterval()) > maxTolerance {
			return fmt.Errorf("%w: burst %d of %d per %s spans more than 2^52 µs", ErrInvalidBurst, l.Burst, l.Count, l.Period)
		}
	}
	return nil
}

// EmissionInterval returns the token bucket's time per token in whole
// microseconds: Period/Count rounded up, so a bucket never runs faster than
// its rate. Stores compute with this value; callers rarely need it.
func (l Limit) EmissionInterval() int64 {
	w := l.Period.Microseconds()
	if l.Count <= 0 {
		return w
	}
	return (w + l.Count - 1) / l.Count
}

// ValidateRequest checks a key, limit and cost, as every store does before it
// touches any state.
func ValidateRequest(key string, l Limit, cost int64) error {
	if key == "" {
		return ErrInvalidKey
	}
	if cost < 1 || cost > MaxCost {
		return fmt.Errorf("%w: %d is not in 1..%d", ErrInvalidCost, cost, int64(MaxCost))
	}
	return l.Validate()
}

// shortDuration writes whole hours, minutes and seconds without zero units
// ("1m", "1h", "24h"), and other durations as [time.Duration.String] does.
func shortDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
