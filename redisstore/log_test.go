package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestSlidingLogEntryPerInstant: a sliding log's sorted set holds one
// member per instant with admitted requests (after its base), whatever
// their cost; an allowed request trims at most 15 expired members, and
// trims whenever the units admitted pass a multiple of 8 (log.lua's
// LOG_TRIM_EVERY and LOG_TRIM_MOST), so no call does work that grows with
// the cost or the backlog, and the backlog shrinks by 7 or more every 8
// units.
func TestSlidingLogEntryPerInstant(t *testing.T) {
	d := standalone[0]
	ctx := context.Background()
	clock := redlimittest.NewClock(today)
	p := prefix(t)
	s := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(p))
	card := func(l redlimit.Limit) int64 {
		t.Helper()
		k := keyOf(t, d, p, fmt.Sprintf("}:sl:%d", l.Period.Microseconds()))
		return atoi(t, d.do(t, k, "ZCARD", k))
	}
	big := redlimit.PerHour(redlimit.MaxLogCount).SlidingLog()
	if r, err := s.AllowN(ctx, "k", big, redlimit.MaxLogCount); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	if n := card(big); n != 2 {
		t.Errorf("a request of cost %d: %d members, want 2 (the base and one entry)", redlimit.MaxLogCount, n)
	}

	l := redlimit.Per(1000, time.Millisecond).SlidingLog()
	for range 10 { // one instant
		s.AllowN(ctx, "k", l, 3)
	}
	if n := card(l); n != 2 {
		t.Errorf("10 requests at one instant: %d members, want 2", n)
	}
	for range 300 { // 300 instants within a period
		clock.Advance(time.Microsecond)
		if r, err := s.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	if n := card(l); n != 302 {
		t.Errorf("after 300 more instants: %d members, want 302", n)
	}
	// A period later every entry has expired; each allowed request trims
	// at most 15, adds one, and every eighth trims.
	clock.Advance(time.Second)
	last := card(l)
	for i := range 400 {
		clock.Advance(time.Microsecond)
		before := card(l)
		if r, err := s.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed || r.Remaining != int64(999-i) {
			t.Fatalf("%+v, %v", r, err)
		}
		after := card(l)
		if after < before-15 || after > before+1 {
			t.Fatalf("request %d: %d members, then %d", i, before, after)
		}
		if i%8 == 7 {
			// 8 units, one trim of up to 15 of the expired entries: the set
			// shrinks by 7 until only the new entries are left.
			if want := max(last-7, int64(i+2)); after > want {
				t.Fatalf("after request %d: %d members, want at most %d (8 requests before: %d)", i, after, want, last)
			}
			last = after
		}
	}
	// Only the 400 new entries, and at most the 15 expired ones of the last trim's bound.
	if n := card(l); n > 400+16 {
		t.Errorf("after 400 requests: %d members, want at most 416", n)
	}
}

// TestSlidingLogSmallLimitKeepsFewExpired: a log of a small count under
// steady traffic keeps few expired entries beside its live ones: trims come
// at least every Count units (log.lua's LOG_TRIM_EVERY, at most), so a
// login limit of 5 holds at most twice its count and the base.
func TestSlidingLogSmallLimitKeepsFewExpired(t *testing.T) {
	d := standalone[0]
	ctx := context.Background()
	clock := redlimittest.NewClock(today)
	p := prefix(t)
	s := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(p))
	l := redlimit.PerSecond(5).SlidingLog()
	var k string
	most := int64(0)
	for i := range 200 {
		clock.Advance(200*time.Millisecond + time.Microsecond)
		if r, err := s.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
		if i == 0 {
			k = keyOf(t, d, p, fmt.Sprintf("}:sl:%d", l.Period.Microseconds()))
		}
		if i >= 20 {
			most = max(most, atoi(t, d.do(t, k, "ZCARD", k)))
		}
	}
	if most > 2*5+1 {
		t.Errorf("a log of 5 per second under steady traffic held up to %d members, want at most 11 (5 live)", most)
	}
}

// TestSlidingLogDebtDenialSearchBounded: a key in debt (a debit of
// redlimit.MaxCost beyond a count of 3: about 2^40 live units, in five
// entries) is denied for its whole period, and each denial waits for a
// unit about 2^40 units on, which log.lua's log_unit_at searches for by
// rank. Its search stays within the set (the newest entry holds the
// unit): a denial makes no more Redis commands than one on a full log of
// a small count, one by one, in a batch's run and in AllowAll, whose
// answers are the memory store's.
func TestSlidingLogDebtDenialSearchBounded(t *testing.T) {
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	clock := redlimittest.NewClock(today)
	s, err := redisstore.New(client, redisstore.WithBatching(false), redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mem := memoryOn(t, clock.Now)
	ctx := context.Background()
	l := redlimit.Per(3, time.Hour).SlidingLog()
	for _, st := range []redlimit.Limiter{s, mem} {
		for range 3 {
			clock.Advance(time.Second)
			if r, err := st.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed {
				t.Fatalf("%+v, %v", r, err)
			}
		}
		clock.Advance(-3 * time.Second)
	}
	clock.Advance(4 * time.Second)
	debit := []redlimit.Request{{Key: "k", Limit: l, Cost: redlimit.MaxCost, Debit: true}}
	d1, err1 := s.AllowAll(ctx, debit)
	d2, err2 := mem.AllowAll(ctx, debit)
	if err1 != nil || err2 != nil || d1.Results[0] != d2.Results[0] {
		t.Fatalf("debit: %+v (%v), memory %+v (%v)", d1, err1, d2, err2)
	}
	clock.Advance(time.Second)
	type decide func(st redlimit.Limiter, n int64) ([]redlimit.Result, error)
	one := func(st redlimit.Limiter, n int64) ([]redlimit.Result, error) {
		r, err := st.AllowN(ctx, "k", l, n)
		return []redlimit.Result{r}, err
	}
	for _, c := range []struct {
		name   string
		redis  decide
		memory decide
	}{
		{"AllowN", one, one},
		{"a run of 4", func(_ redlimit.Limiter, n int64) ([]redlimit.Result, error) {
			reqs := []redlimit.Request{{Key: "k", Limit: l, Cost: n}, {Key: "k", Limit: l, Cost: 1}, {Key: "k", Limit: l, Cost: 3}, {Key: "k", Limit: l, Cost: n}}
			return s.DecideBatch(ctx, reqs, []bool{false, true, false, true})
		}, func(st redlimit.Limiter, n int64) ([]redlimit.Result, error) {
			var out []redlimit.Result
			for i, m := range []int64{n, 1, 3, n} {
				f := st.AllowN
				if i%2 == 1 {
					f = st.Peek
				}
				r, err := f(ctx, "k", l, m)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}},
		{"AllowAll", func(st redlimit.Limiter, n int64) ([]redlimit.Result, error) {
			d, err := st.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: n}, {Key: "other", Limit: l, Cost: 1}})
			return d.Results, err
		}, nil},
		{"a debit", func(st redlimit.Limiter, n int64) ([]redlimit.Result, error) {
			d, err := st.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: n, Debit: true}})
			return d.Results, err
		}, nil},
	} {
		if c.memory == nil {
			c.memory = c.redis
		}
		for n := int64(1); n <= 3; n++ {
			clock.Advance(time.Millisecond)
			before := innerCommands(t, srv)
			got, err1 := c.redis(s, n)
			after := innerCommands(t, srv)
			want, err2 := c.memory(mem, n)
			if err1 != nil || err2 != nil || !slices.Equal(got, want) {
				t.Fatalf("%s of cost %d: %+v (%v), memory %+v (%v)", c.name, n, got, err1, want, err2)
			}
			if got[0].Allowed {
				t.Fatalf("%s of cost %d allowed in debt: %+v", c.name, n, got[0])
			}
			total := 0.0
			for name, v := range after {
				total += v - before[name]
			}
			// Two reads, then per decision the rank of the first live
			// entry, the set's end and a search among two live entries;
			// AllowAll's other key, two more.
			if most := float64(4 + 4*len(got)); total > most {
				t.Errorf("%s of cost %d: %v Redis commands in the script, want at most %v: %v", c.name, n, total, most, diff(after, before))
			}
		}
	}
}

// diff returns a - b by name, without the names equal in both.
func diff(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range a {
		if d := v - b[name]; d != 0 {
			out[name] = d
		}
	}
	return out
}
