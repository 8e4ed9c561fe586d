package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
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
