package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestFloodKeepsExhaustedKeys (issue 11, finding 9): a flood of new keys
// with long periods reaches the bound while a 5/hour login limit is
// exhausted. The login stays denied until its own hour has passed (the old
// store evicted it, the state closest to expiring, after 3,000 junk keys);
// junk keys beyond the bound are refused, counted, and told when to retry;
// once the junk's day has passed, new keys take its place.
func TestFloodKeepsExhaustedKeys(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithMaxKeys(1000), memory.WithSweepInterval(0))
	ctx := context.Background()
	login := redlimit.PerHour(5).SlidingLog()
	for i := range 6 {
		r, err := s.AllowN(ctx, "login:alice", login, 1)
		if err != nil || r.Allowed != (i < 5) {
			t.Fatalf("login %d: %+v, %v", i, r, err)
		}
		clock.Advance(time.Second)
	}
	junk := redlimit.PerDay(10).FixedWindow()
	admitted := 0
	for i := range 4000 {
		r, err := s.AllowN(ctx, fmt.Sprint("junk:", i), junk, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		} else if r.Remaining != 0 || r.RetryAfter < time.Millisecond || r.RetryAfter > 24*time.Hour || r.ResetAfter != 0 {
			t.Fatalf("junk %d refused with %+v", i, r)
		}
		if i%1000 == 999 {
			clock.Advance(time.Second)
			if r, err := s.AllowN(ctx, "login:alice", login, 1); err != nil || r.Allowed {
				t.Fatalf("after %d junk keys: login %+v, %v, want denied", i+1, r, err)
			}
		}
	}
	st := s.Stats()
	if admitted != 999 || st.States != 1000 || st.Refused != 4000-999 {
		t.Errorf("admitted %d junk keys, stats %+v; want 999 admitted, 1000 states, %d refused", admitted, st, 4000-999)
	}

	// The login's hour passes: its state is idle, and decided again.
	clock.Advance(time.Hour)
	if r, err := s.AllowN(ctx, "login:alice", login, 1); err != nil || !r.Allowed || r.Remaining != 4 {
		t.Errorf("an hour later: login %+v, %v, want allowed with 4 left", r, err)
	}
	// A day later the junk is idle: new keys evict it. (While idle states
	// are many, a sample finds one; the sweeper removes the last ones.)
	clock.Advance(24 * time.Hour)
	for i := range 500 {
		if r, err := s.AllowN(ctx, fmt.Sprint("new:", i), junk, 1); err != nil || !r.Allowed {
			t.Fatalf("a day later, new key %d: %+v, %v", i, r, err)
		}
	}
	s.Sweep()
	if st := s.Stats(); st.States != 500 || st.Refused != 4000-999 {
		t.Errorf("stats %+v after the junk's day and a sweep, want the 500 new states", st)
	}
}

// TestRefusedRetryAfter: a refused request is told to retry when a state
// of the store becomes idle, and is allowed then; AllowAll refuses the
// requests that need room and answers for the others.
func TestRefusedRetryAfter(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0.Add(250 * time.Millisecond))
	s := newStore(t, memory.WithClock(clock.Now), memory.WithMaxKeys(10), memory.WithSweepInterval(0))
	ctx := context.Background()
	l := redlimit.PerSecond(5).FixedWindow() // every window ends 750 ms from now
	for i := range 10 {
		if r, err := s.AllowN(ctx, fmt.Sprint("k", i), l, 1); err != nil || !r.Allowed {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	r, err := s.AllowN(ctx, "new", l, 1)
	if err != nil || r.Allowed || r.RetryAfter != 750*time.Millisecond || r.Max != 5 || r.Remaining != 0 {
		t.Fatalf("at the bound: %+v, %v, want refused for 750ms", r, err)
	}
	d, err := s.AllowAll(ctx, []redlimit.Request{
		{Key: "k1", Limit: l, Cost: 1},
		{Key: "new", Limit: l, Cost: 1},
	})
	if err != nil || d.Allowed || !d.Results[0].Allowed || d.Results[0].Remaining != 3 ||
		d.Results[1].Allowed || d.RetryAfter() != 750*time.Millisecond {
		t.Fatalf("AllowAll at the bound: %+v, %v", d, err)
	}
	if r, err := s.Peek(ctx, "k1", l, 1); err != nil || r.Remaining != 3 {
		t.Errorf("the refused AllowAll consumed: %+v, %v", r, err)
	}
	if st := s.Stats(); st.Refused != 2 {
		t.Errorf("%d refused, want 2", st.Refused)
	}
	clock.Advance(750*time.Millisecond - time.Microsecond)
	if r, err := s.AllowN(ctx, "new", l, 1); err != nil || r.Allowed || r.RetryAfter != time.Millisecond {
		t.Errorf("1µs before: %+v, %v, want refused for the 1ms floor", r, err)
	}
	clock.Advance(time.Microsecond)
	if r, err := s.AllowN(ctx, "new", l, 1); err != nil || !r.Allowed {
		t.Errorf("at RetryAfter: %+v, %v, want allowed", r, err)
	}
	// A decision that needs more room than the store has is never allowed.
	small := newStore(t, memory.WithClock(clock.Now), memory.WithMaxKeys(1))
	d, err = small.AllowAll(ctx, []redlimit.Request{{Key: "a", Limit: l, Cost: 1}, {Key: "b", Limit: l, Cost: 1}})
	if err != nil || d.Allowed || d.RetryAfter() != redlimit.Never {
		t.Errorf("two new states in a store of one: %+v, %v, want refused for ever", d, err)
	}
}

// longKey returns a key of exactly 64 KiB, the longest the service takes.
func longKey(i int) string {
	return strings.Repeat("k", 64<<10-8) + fmt.Sprintf("%08d", i)
}

// TestMaxBytesBoundsLongKeys: keys of 64 KiB fill a 4 MiB store after 63
// of them; the rest are refused, and the heap holds what the bound says.
func TestMaxBytesBoundsLongKeys(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	const bound = 4 << 20
	s := newStore(t, memory.WithClock(clock.Now), memory.WithMaxBytes(bound), memory.WithSweepInterval(0))
	ctx := context.Background()
	l := redlimit.PerHour(10).FixedWindow()
	before := heapInUse()
	admitted := 0
	for i := range 200 {
		r, err := s.AllowN(ctx, longKey(i), l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	grown := int64(heapInUse()) - int64(before)
	st := s.Stats()
	t.Logf("%d admitted, %+v, heap +%d", admitted, st, grown)
	if admitted != 63 || st.Refused != 200-63 || st.Bytes > bound {
		t.Errorf("admitted %d keys of 64 KiB, stats %+v; want 63 in %d bytes", admitted, st, bound)
	}
	if grown > bound+bound/8 || grown < st.Bytes*7/8 {
		t.Errorf("the heap grew by %d bytes, the estimate is %d, the bound %d", grown, st.Bytes, bound)
	}
	// Keys with state are decided as usual; an hour later, new keys evict.
	if r, err := s.AllowN(ctx, longKey(0), l, 1); err != nil || !r.Allowed || r.Remaining != 8 {
		t.Errorf("a known key at the bound: %+v, %v", r, err)
	}
	clock.Advance(time.Hour)
	for i := range 31 {
		if r, err := s.AllowN(ctx, longKey(1000+i), l, 1); err != nil || !r.Allowed {
			t.Fatalf("an hour later, new key %d: %+v, %v", i, r, err)
		}
	}
}

// TestMaxBytesBoundsSlidingLogs: a sliding log's buffer grows only within
// the byte bound; a request that needs it to grow beyond is refused, and
// other known keys are decided as usual.
func TestMaxBytesBoundsSlidingLogs(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	const bound = 64 << 10
	s := newStore(t, memory.WithClock(clock.Now), memory.WithMaxBytes(bound), memory.WithSweepInterval(0))
	ctx := context.Background()
	other := redlimit.PerHour(10).FixedWindow()
	if r, err := s.AllowN(ctx, "other", other, 1); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	log := redlimit.PerHour(100_000).SlidingLog()
	admitted := 0
	for range 10_000 {
		clock.Advance(time.Millisecond)
		r, err := s.AllowN(ctx, "log", log, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed {
			if r.RetryAfter < time.Millisecond || r.RetryAfter > time.Hour {
				t.Fatalf("refused with %+v", r)
			}
			break
		}
		admitted++
	}
	st := s.Stats()
	// One entry per instant, 16 bytes each; the buffer doubles from 4
	// entries: 2,048 (32 KiB) fit, 4,096 not.
	if admitted != 2048 || st.Bytes > bound || st.Refused != 1 {
		t.Errorf("admitted %d, stats %+v; want 2048 within %d bytes, 1 refused", admitted, st, bound)
	}
	if r, err := s.AllowN(ctx, "other", other, 1); err != nil || !r.Allowed {
		t.Errorf("another known key at the bound: %+v, %v", r, err)
	}
}

// TestMaxBytesCountsOnlyLiveLogEntries: a sliding log whose buffer is full
// of entries that have aged out reuses it, so at the byte bound it is
// decided as usual, not refused for a growth it does not need.
func TestMaxBytesCountsOnlyLiveLogEntries(t *testing.T) {
	ctx := context.Background()
	log := redlimit.Per(100, time.Second).SlidingLog()
	fixed := redlimit.PerHour(10).FixedWindow()
	// fill makes a log of 64 entries, 10 ms apart (a buffer of 64), and
	// three other keys.
	fill := func(s *memory.Store, clock *redlimittest.Clock) {
		for i := range 64 {
			if r, err := s.AllowN(ctx, "log", log, 1); err != nil || !r.Allowed {
				t.Fatalf("log %d: %+v, %v", i, r, err)
			}
			clock.Advance(10 * time.Millisecond)
		}
		for i := range 3 {
			if r, err := s.AllowN(ctx, fmt.Sprint("k", i), fixed, 1); err != nil || !r.Allowed {
				t.Fatalf("k%d: %+v, %v", i, r, err)
			}
		}
	}
	clock := redlimittest.NewClock(redlimittest.T0)
	probe := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	fill(probe, clock)
	// Room for less than a key, and less than the log's buffer grown to
	// its count (36 more timestamps, 288 bytes).
	bound := probe.Stats().Bytes + 100

	clock = redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0), memory.WithMaxBytes(bound))
	fill(s, clock)
	if r, err := s.AllowN(ctx, "k3", fixed, 1); err != nil || r.Allowed {
		t.Fatalf("a new key at the bound: %+v, %v, want refused", r, err)
	}
	// At 1,005 ms the first entry has aged out: 63 live, room for one.
	clock.Set(redlimittest.T0.Add(1005 * time.Millisecond))
	if r, err := s.AllowN(ctx, "log", log, 1); err != nil || !r.Allowed || r.Remaining != 36 {
		t.Errorf("the log at the bound: %+v, %v, want allowed with 36 left", r, err)
	}
	if st := s.Stats(); st.Bytes > bound || st.Refused != 1 {
		t.Errorf("%+v, bound %d", st, bound)
	}
}
