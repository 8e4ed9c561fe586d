package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// neverAt stands for a RetryAfter of Never.
var neverAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// calendarStep is a request at an instant and what it must answer: the
// instants of its retry and reset (zero for none).
type calendarStep struct {
	at        time.Time
	cost      int64
	allowed   bool
	remaining int64
	retryAt   time.Time
	resetAt   time.Time
}

// calendarCases cross DST changes both ways, month ends, Feb 29, week
// starts and year ends, in Europe/Berlin.
func calendarCases(t testing.TB) []struct {
	name  string
	limit redlimit.Limit
	steps []calendarStep
} {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b := func(y int, m time.Month, d, h, min, s, us int) time.Time {
		return time.Date(y, m, d, h, min, s, us*1000, berlin)
	}
	var zero time.Time
	return []struct {
		name  string
		limit redlimit.Limit
		steps []calendarStep
	}{
		{"day across spring forward", redlimit.PerCalendar(2, redlimit.Day, "Europe/Berlin"), []calendarStep{
			{b(2026, 3, 28, 23, 30, 0, 0), 1, true, 1, zero, b(2026, 3, 29, 0, 0, 0, 0)},
			{b(2026, 3, 29, 0, 0, 0, 0), 1, true, 1, zero, b(2026, 3, 30, 0, 0, 0, 0)},
			{b(2026, 3, 29, 1, 59, 0, 0), 1, true, 0, zero, b(2026, 3, 30, 0, 0, 0, 0)},
			{b(2026, 3, 29, 3, 0, 0, 0), 1, false, 0, b(2026, 3, 30, 0, 0, 0, 0), b(2026, 3, 30, 0, 0, 0, 0)},
			{b(2026, 3, 29, 23, 59, 59, 999999), 1, false, 0, b(2026, 3, 30, 0, 0, 0, 0), b(2026, 3, 30, 0, 0, 0, 0)},
			{b(2026, 3, 30, 0, 0, 0, 0), 2, true, 0, zero, b(2026, 3, 31, 0, 0, 0, 0)},
			// The clock goes back: counted in the key's later window.
			{b(2026, 3, 29, 23, 0, 0, 0), 1, false, 0, b(2026, 3, 31, 0, 0, 0, 0), b(2026, 3, 31, 0, 0, 0, 0)},
		}},
		{"day across fall back", redlimit.PerCalendar(2, redlimit.Day, "Europe/Berlin"), []calendarStep{
			{b(2026, 10, 25, 0, 0, 0, 0), 2, true, 0, zero, b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 25, 0, 0, 0, 0).Add(150 * time.Minute), 1, false, 0, b(2026, 10, 26, 0, 0, 0, 0), b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 25, 0, 0, 0, 0).Add(210 * time.Minute), 1, false, 0, b(2026, 10, 26, 0, 0, 0, 0), b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 25, 23, 59, 59, 0), 3, false, 0, neverAt, b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 26, 0, 0, 0, 0), 1, true, 1, zero, b(2026, 10, 27, 0, 0, 0, 0)},
		}},
		{"week from Monday", redlimit.PerCalendar(1, redlimit.Week, "Europe/Berlin"), []calendarStep{
			{b(2026, 10, 19, 0, 0, 0, 0), 1, true, 0, zero, b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 25, 23, 59, 0, 0), 1, false, 0, b(2026, 10, 26, 0, 0, 0, 0), b(2026, 10, 26, 0, 0, 0, 0)},
			{b(2026, 10, 26, 0, 0, 0, 0), 1, true, 0, zero, b(2026, 11, 2, 0, 0, 0, 0)},
		}},
		{"month ends and Feb 29", redlimit.PerCalendar(3, redlimit.Month, "Europe/Berlin"), []calendarStep{
			{b(2028, 1, 31, 23, 59, 59, 999999), 3, true, 0, zero, b(2028, 2, 1, 0, 0, 0, 0)},
			{b(2028, 2, 1, 0, 0, 0, 0), 1, true, 2, zero, b(2028, 3, 1, 0, 0, 0, 0)},
			{b(2028, 2, 29, 23, 59, 0, 0), 2, true, 0, zero, b(2028, 3, 1, 0, 0, 0, 0)},
			{b(2028, 2, 29, 23, 59, 30, 0), 1, false, 0, b(2028, 3, 1, 0, 0, 0, 0), b(2028, 3, 1, 0, 0, 0, 0)},
			{b(2028, 3, 1, 0, 0, 0, 0), 1, true, 2, zero, b(2028, 4, 1, 0, 0, 0, 0)},
		}},
		{"year end", redlimit.PerCalendar(2, redlimit.Year, "Europe/Berlin"), []calendarStep{
			{b(2027, 6, 1, 12, 0, 0, 0), 2, true, 0, zero, b(2028, 1, 1, 0, 0, 0, 0)},
			{b(2027, 12, 31, 23, 59, 59, 999999), 1, false, 0, b(2028, 1, 1, 0, 0, 0, 0), b(2028, 1, 1, 0, 0, 0, 0)},
			{b(2028, 1, 1, 0, 0, 0, 0), 1, true, 1, zero, b(2029, 1, 1, 0, 0, 0, 0)},
		}},
	}
}

// TestCalendarSteps runs calendarCases on the memory store and on Redis,
// each at explicit instants: both give the answers the calendar says.
func TestCalendarSteps(t *testing.T) {
	type store struct {
		name string
		make func(t *testing.T, clock *redlimittest.Clock) redlimit.Limiter
	}
	stores := []store{{"memory", func(t *testing.T, clock *redlimittest.Clock) redlimit.Limiter {
		m, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}}}
	for _, d := range deployments[:3] {
		stores = append(stores, store{d.name, func(t *testing.T, clock *redlimittest.Clock) redlimit.Limiter {
			return d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)))
		}})
	}
	ctx := context.Background()
	for _, s := range stores {
		for _, tc := range calendarCases(t) {
			t.Run(s.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				clock := redlimittest.NewClock(tc.steps[0].at)
				lim := s.make(t, clock)
				for i, st := range tc.steps {
					clock.Set(st.at)
					var res redlimit.Result
					var err error
					if i%2 == 0 {
						res, err = lim.AllowN(ctx, "k", tc.limit, st.cost)
					} else {
						// AllowAll takes the path of several limits.
						var dec redlimit.Decision
						dec, err = lim.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: tc.limit, Cost: st.cost}, {Key: "other", Limit: redlimit.PerSecond(1000), Cost: 1}})
						if err == nil {
							res = dec.Results[0]
						}
					}
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					checkCalendarStep(t, i, st, res)
				}
			})
		}
	}
}

func checkCalendarStep(t *testing.T, i int, st calendarStep, res redlimit.Result) {
	t.Helper()
	instant := func(d time.Duration) time.Time {
		if d == 0 {
			return time.Time{}
		}
		if d == redlimit.Never {
			return neverAt
		}
		return st.at.Add(d)
	}
	if res.Allowed != st.allowed || res.Remaining != st.remaining ||
		!instant(res.RetryAfter).Equal(st.retryAt) || !instant(res.ResetAfter).Equal(st.resetAt) {
		t.Fatalf("step %d at %s: allowed %v remaining %d retry at %s reset at %s; want %v %d %s %s",
			i, st.at, res.Allowed, res.Remaining, instant(res.RetryAfter), instant(res.ResetAfter),
			st.allowed, st.remaining, st.retryAt, st.resetAt)
	}
}

// TestCalendarConcurrentExact: several stores, each with many goroutines,
// on one calendar key at Redis's own clock, never admit above the limit.
// Their hosts' clocks are skewed from Redis's, by up to an hour: Redis's
// clock picks the window, and RetryAfter ends it.
func TestCalendarConcurrentExact(t *testing.T) {
	const (
		limit      = 100
		perStore   = 16
		eachAsking = 20
	)
	l := redlimit.PerCalendar(limit, redlimit.Year, "Europe/Berlin")
	p := prefix(t)
	var stores []*redisstore.Store
	for i, d := range []deployment{deployments[0], deployments[1], deployments[0], deployments[1]} {
		skew := []time.Duration{-2 * time.Second, 2 * time.Second, -time.Hour, time.Hour}[i]
		host := func() time.Time { return time.Now().Add(skew) }
		stores = append(stores, d.store(t, redisstore.WithPrefix(p), redisstore.WithHostClock(host)))
	}
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*perStore)
	for _, s := range stores {
		for g := range perStore {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range eachAsking {
					cost := int64(1 + (g+i)%3)
					res, err := s.AllowN(ctx, "hot", l, cost)
					if err != nil {
						errs <- err
						return
					}
					if res.Allowed {
						admitted.Add(cost)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The goroutines ask far more than the limit: never above it, and what
	// was not admitted is what remains.
	res, err := stores[0].Peek(ctx, "hot", l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := admitted.Load(); got > limit || got+res.Remaining != limit {
		t.Fatalf("admitted %d in one calendar year with %d remaining, limit %d", got, res.Remaining, limit)
	}
	_, end := l.Calendar.Window(time.Now())
	if d := time.Until(end) - res.RetryAfter; d < -time.Minute || d > time.Minute {
		t.Fatalf("RetryAfter %s, want the time to the year's end in Berlin, %s", res.RetryAfter, time.Until(end))
	}
}

// TestCalendarHostClockSkew: hosts whose clocks differ from the one the
// script decides by (WithClock here; Redis's TIME without it) share its
// calendar window. Two stores, one host behind the server's clock and one
// ahead, with a calendar boundary between them, decide at one server
// instant: every path (AllowN, AllowAll, a debit, Admit and Refund, Reset)
// counts in the server's window, whose end ResetAfter and RetryAfter name.
func TestCalendarHostClockSkew(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b := func(y int, m time.Month, d, h, min, s, ms int) time.Time {
		return time.Date(y, m, d, h, min, s, ms*1e6, berlin)
	}
	cases := []struct {
		name   string
		unit   redlimit.CalendarUnit
		server time.Time
		skew   time.Duration // host A is skew behind the server, host B skew ahead
	}{
		{"month, server just after its end", redlimit.Month, b(2026, 4, 1, 0, 0, 0, 500), 2 * time.Second},
		{"month, server just before its end", redlimit.Month, b(2026, 3, 31, 23, 59, 59, 500), 2 * time.Second},
		{"23-hour day, just after midnight", redlimit.Day, b(2026, 3, 29, 0, 0, 1, 0), 3 * time.Second},
		{"25-hour day, just before midnight", redlimit.Day, b(2026, 10, 25, 23, 59, 59, 0), 3 * time.Second},
		{"week, an hour apart", redlimit.Week, b(2026, 10, 26, 0, 20, 0, 0), time.Hour},
		{"year, 1 µs apart", redlimit.Year, b(2028, 1, 1, 0, 0, 0, 0), time.Microsecond},
	}
	ctx := context.Background()
	for _, d := range deployments[:3] {
		for _, tc := range cases {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				l := redlimit.PerCalendar(1, tc.unit, "Europe/Berlin")
				_, end := l.Calendar.Window(tc.server)
				left := end.Sub(tc.server)
				server := redlimittest.NewClock(tc.server)
				p := prefix(t)
				host := func(skew time.Duration) *redisstore.Store {
					return d.store(t, redisstore.WithPrefix(p), redisstore.WithClock(server.Now),
						redisstore.WithHostClock(func() time.Time { return server.Now().Add(skew) }))
				}
				a, bh := host(-tc.skew), host(tc.skew)
				want := func(step string, res redlimit.Result, allowed bool) {
					t.Helper()
					retry := time.Duration(0)
					if !allowed {
						retry = left
					}
					if res.Allowed != allowed || res.Remaining != 0 || res.RetryAfter != retry || res.ResetAfter != left {
						t.Fatalf("%s: %+v; want allowed %v, remaining 0, retry-after %s, reset-after %s (the server's window ends %s)",
							step, res, allowed, retry, left, end)
					}
				}
				one := func(s *redisstore.Store, key string) redlimit.Result {
					t.Helper()
					res, err := s.AllowN(ctx, key, l, 1)
					if err != nil {
						t.Fatal(err)
					}
					return res
				}
				all := func(s *redisstore.Store, key string, debit bool) redlimit.Result {
					t.Helper()
					dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 1, Debit: debit}, {Key: "other", Limit: redlimit.PerSecond(1000), Cost: 1}})
					if err != nil {
						t.Fatal(err)
					}
					return dec.Results[0]
				}
				for i, s := range []*redisstore.Store{a, bh} {
					// Host A first, then B; and B first, then A.
					first, second := s, bh
					if i == 1 {
						second = a
					}
					k := strconv.Itoa(i)
					want("AllowN, first host", one(first, "n"+k), true)
					want("AllowN, second host", one(second, "n"+k), false)
					want("AllowAll, first host", all(first, "s"+k, false), true)
					want("AllowAll, second host", all(second, "s"+k, false), false)
					want("debit, first host", all(first, "d"+k, true), true)
					want("debit, second host", all(second, "d"+k, true), false)
					g, err := first.Admit(ctx, []redlimit.Request{{Key: "g" + k, Limit: l, Cost: 1}})
					if err != nil || !g.Allowed {
						t.Fatalf("Admit: %v, %v", g, err)
					}
					want("Admit's result", g.Results[0], true)
					if err := second.Refund(ctx, g, []int64{1}); err != nil {
						t.Fatal(err)
					}
					want("AllowN after the refund, second host", one(second, "g"+k), true)
					if err := second.Reset(ctx, "n"+k, l); err != nil {
						t.Fatal(err)
					}
					want("AllowN after the reset, first host", one(first, "n"+k), true)
				}
			})
		}
	}
}

// TestCalendarClockTooFar: a host whose clock is so far from Redis's that
// none of the three calendar windows it sends holds Redis's clock (a day
// apart or more) gets ErrClockSkew for its calendar decisions, and only
// for those: the other decisions of its batch are decided. A refund or a
// reset needs no window and goes on. At the edge of the windows sent, it
// is decided in the window that holds Redis's clock.
func TestCalendarClockTooFar(t *testing.T) {
	utc := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	day := redlimit.PerCalendar(1, redlimit.Day, "")
	cases := []struct {
		name         string
		server, host time.Time
		skewed       bool
	}{
		{"host two days ahead", utc(10, 12), utc(12, 12), true},
		{"host two days behind", utc(10, 12), utc(8, 12), true},
		{"server at the first bound", utc(10, 0), utc(11, 23), false},
		{"server 1 µs before it", utc(10, 0).Add(-time.Microsecond), utc(11, 23), true},
		{"server 1 µs before the last bound", utc(10, 0).Add(-time.Microsecond), utc(8, 0), false},
		{"server at it", utc(10, 0), utc(8, 23), true},
	}
	ctx := context.Background()
	for _, d := range deployments[:3] {
		for _, tc := range cases {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				server := redlimittest.NewClock(tc.server)
				p := prefix(t)
				s := d.store(t, redisstore.WithPrefix(p), redisstore.WithClock(server.Now),
					redisstore.WithHostClock(func() time.Time { return tc.host }))
				res, err := s.AllowN(ctx, "k", day, 1)
				if !tc.skewed {
					_, end := day.Calendar.Window(tc.server)
					if err != nil || !res.Allowed || res.ResetAfter != end.Sub(tc.server) {
						t.Fatalf("AllowN: %+v, %v; want allowed until %s", res, err, end)
					}
					return
				}
				if !errors.Is(err, redlimit.ErrClockSkew) {
					t.Fatalf("AllowN: %+v, %v; want ErrClockSkew", res, err)
				}
				// One batch: the calendar decision fails alone.
				other := redlimit.Request{Key: "k", Limit: redlimit.PerHour(5), Cost: 1} // one slot
				out, errs := s.DecideMixedBatchEach(ctx, [][]redlimit.Request{{{Key: "k", Limit: day, Cost: 1}}, {other}, {other, {Key: "k", Limit: day, Cost: 1}}}, nil, false)
				if !errors.Is(errs[0], redlimit.ErrClockSkew) || errs[1] != nil || !out[1][0].Allowed || !errors.Is(errs[2], redlimit.ErrClockSkew) {
					t.Fatalf("a batch: %v, %v; want ErrClockSkew for the calendar decisions only", out, errs)
				}
				if _, err := s.Admit(ctx, []redlimit.Request{{Key: "k", Limit: day, Cost: 1}}); !errors.Is(err, redlimit.ErrClockSkew) {
					t.Fatalf("Admit: %v, want ErrClockSkew", err)
				}
				if err := s.Reset(ctx, "k", day); err != nil {
					t.Fatalf("Reset: %v", err)
				}
				// A grant admitted by a host in step, refunded by the far one.
				near := d.store(t, redisstore.WithPrefix(p), redisstore.WithClock(server.Now))
				g, err := near.Admit(ctx, []redlimit.Request{{Key: "g", Limit: day, Cost: 1}})
				if err != nil || !g.Allowed {
					t.Fatalf("Admit in step: %v, %v", g, err)
				}
				if err := s.Refund(ctx, g, []int64{1}); err != nil {
					t.Fatalf("Refund: %v", err)
				}
				if res, err := near.AllowN(ctx, "g", day, 1); err != nil || !res.Allowed {
					t.Fatalf("AllowN after the refund: %+v, %v; want allowed", res, err)
				}
			})
		}
	}
}

// TestCalendarSkewedResetKeepsGeneration: a reset from a host too far from
// Redis's clock to send its window must not shorten the key's tombstone.
// A refund of a grant admitted before the resets must then give nothing
// back, as on the memory store, not take from requests admitted since.
func TestCalendarSkewedResetKeepsGeneration(t *testing.T) {
	day := redlimit.PerCalendar(2, redlimit.Day, "")
	serverAt := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, d := range deployments[:3] {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			server := redlimittest.NewClock(serverAt)
			p := prefix(t)
			near := d.store(t, redisstore.WithPrefix(p), redisstore.WithClock(server.Now))
			far := d.store(t, redisstore.WithPrefix(p), redisstore.WithClock(server.Now),
				redisstore.WithHostClock(func() time.Time { return serverAt.Add(48 * time.Hour) }))
			g, err := near.Admit(ctx, []redlimit.Request{{Key: "g", Limit: day, Cost: 1}})
			if err != nil || !g.Allowed {
				t.Fatalf("Admit: %v, %v", g, err)
			}
			if err := near.Reset(ctx, "g", day); err != nil {
				t.Fatal(err)
			}
			// The key is gone: the far host's reset finds no TTL to keep.
			if err := far.Reset(ctx, "g", day); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // past a tombstone of a few ms
			for i := range 2 {
				if res, err := near.AllowN(ctx, "g", day, 1); err != nil || !res.Allowed {
					t.Fatalf("AllowN %d after the resets: %+v, %v; want allowed", i, res, err)
				}
			}
			if err := near.Refund(ctx, g, []int64{1}); err != nil {
				t.Fatal(err)
			}
			if res, err := near.AllowN(ctx, "g", day, 1); err != nil || res.Allowed {
				t.Fatalf("AllowN after refunding a grant from before the resets: %+v, %v; want denied (the resets gave it back)", res, err)
			}
		})
	}
}
