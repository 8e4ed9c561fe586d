package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestAdmitCountsRefundRecord: the refund record an Admit gives a token
// bucket (memory/refund.go) is counted in the store's bytes, as the
// states are, and given back with them. It was not: a client whose
// requests were admitted and never refunded grew the heap past
// WithMaxBytes by a record a bucket.
func TestAdmitCountsRefundRecord(t *testing.T) {
	ctx := context.Background()
	lim := redlimit.PerHour(10).TokenBucket(10)
	clock := redlimittest.NewClock(redlimittest.T0)
	plain := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	admitted := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	const keys = 100
	for i := range keys {
		reqs := []redlimit.Request{{Key: fmt.Sprint("k", i), Limit: lim, Cost: 1}}
		if d, err := plain.AllowAll(ctx, reqs); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		if g, err := admitted.Admit(ctx, reqs); err != nil || !g.Allowed {
			t.Fatal(g, err)
		}
		// A second Admit on the bucket makes no second record.
		if g, err := admitted.Admit(ctx, reqs); err != nil || !g.Allowed {
			t.Fatal(g, err)
		}
	}
	if got, want := admitted.Stats().Bytes-plain.Stats().Bytes, int64(keys*memory.RecordBytes); got != want {
		t.Errorf("Admit's buckets take %d bytes more than AllowAll's, want %d (a record each)", got, want)
	}
	if _, bytes, _, _, _ := admitted.Audit(); bytes != admitted.Stats().Bytes {
		t.Errorf("the states hold %d bytes, the store counts %d", bytes, admitted.Stats().Bytes)
	}
	// Idle, the buckets are swept, records and all.
	clock.Advance(2 * time.Hour)
	admitted.Sweep()
	if st := admitted.Stats(); st.States != 0 || st.Bytes != 0 {
		t.Errorf("after the sweep: %+v", st)
	}
}

// TestHeldGrantsStayWithinMaxBytes: a client holds the grants of many
// admissions it never refunds (a reserve.Ledger holds up to MaxPending),
// on sliding logs whose buffers it made large, and lets each go idle, so
// that the store evicts them under a tight WithMaxBytes. The heap grows by
// the bound and the grants themselves, not by the evicted states: a
// grant once kept the state it was counted in, buffer and all, and so
// held memory the store had given back. Refund still finds a live state,
// and gives nothing back to an evicted one or to the state that replaced
// it.
func TestHeldGrantsStayWithinMaxBytes(t *testing.T) {
	ctx := context.Background()
	const (
		maxBytes = 256 << 10
		keys     = 600
		instants = 256 // a buffer of 4 KiB a key
	)
	lim := redlimit.PerSecond(1000).SlidingLog()
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0), memory.WithMaxBytes(maxBytes))
	grants := make([]*redlimit.Grant, 0, keys)
	before := heapInUse()
	for i := range keys {
		key := fmt.Sprint("k", i)
		for range instants - 1 {
			clock.Advance(time.Microsecond)
			if r, err := s.AllowN(ctx, key, lim, 1); err != nil || !r.Allowed {
				t.Fatalf("%s: %+v, %v", key, r, err)
			}
		}
		clock.Advance(time.Microsecond)
		g, err := s.Admit(ctx, []redlimit.Request{{Key: key, Limit: lim, Cost: 1}})
		if err != nil || !g.Allowed {
			t.Fatalf("%s: admit: %+v, %v", key, g, err)
		}
		grants = append(grants, g)
		if i < keys-1 {
			clock.Advance(2 * time.Second) // idle: evictable
		}
		if b := s.Stats().Bytes; b > maxBytes {
			t.Fatalf("the store counts %d bytes, above its bound of %d", b, maxBytes)
		}
	}
	grown := int64(heapInUse() - before)
	// A grant (its decision, requests and receipt) takes a few hundred
	// bytes; a pinned state took over 4 KiB.
	const grantBytes = 1024
	t.Logf("%d grants held: heap +%d bytes (%d a grant beyond the bound)", keys, grown, (grown-maxBytes)/keys)
	if limit := int64(maxBytes + keys*grantBytes); grown > limit {
		t.Errorf("the heap grew by %d bytes with %d grants held, want at most %d: the bound and the grants", grown, keys, limit)
	}

	// The last key's state is live: its refund gives back.
	last := grants[keys-1]
	if err := s.Refund(ctx, last, []int64{1}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.LogEntries("k599", lim); n != instants-1 {
		t.Errorf("after the live refund: %d entries, want %d", n, instants-1)
	}
	// The first key's state was evicted: a new one replaced it, which the
	// old grant does not touch.
	if r, err := s.AllowN(ctx, "k0", lim, 5); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	if err := s.Refund(ctx, grants[0], []int64{1}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Peek(ctx, "k0", lim, 1); err != nil || r.Remaining != 1000-5-1 {
		t.Errorf("k0 after the refund of the evicted state's grant: %+v, %v; want 994 remaining", r, err)
	}
}

// TestLogRefundLeavesNoEmptyEntry (issue 25, item 6): a refund that
// empties a sliding log's entry removes it, wherever it is in the log, as
// the Redis store does (lua/refund.lua). An emptied entry that was not the
// newest stayed with 0 units, became the newest once the newest was
// refunded too, and then set the times: a denial's ResetAfter from its
// time, and a request after a clock step back stamped at it.
func TestLogRefundLeavesNoEmptyEntry(t *testing.T) {
	ctx := context.Background()
	lim := redlimit.Per(10, 100*time.Millisecond).SlidingLog()
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	at := func(ms int) { clock.Set(redlimittest.T0.Add(time.Duration(ms) * time.Millisecond)) }
	admit := func(n int64) *redlimit.Grant {
		t.Helper()
		g, err := s.Admit(ctx, []redlimit.Request{{Key: "k", Limit: lim, Cost: n}})
		if err != nil || !g.Allowed {
			t.Fatalf("admit %d: %+v, %v", n, g, err)
		}
		return g
	}
	at(0)
	admit(8)
	at(20)
	middle := admit(1)
	at(50)
	newest := admit(1)
	at(60)
	for _, g := range []*redlimit.Grant{middle, newest} {
		if err := s.Refund(ctx, g, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		at   int
		cost int64
		want redlimit.Result
	}{
		// Only the 8 units at 0 ms are left: they set both times.
		{60, 5, redlimit.Result{Max: 10, Remaining: 2, RetryAfter: 40 * time.Millisecond, ResetAfter: 40 * time.Millisecond}},
		// The clock steps back: the request is stamped at 10 ms, after the
		// newest entry left (0 ms), not at the emptied one's 20 ms.
		{10, 2, redlimit.Result{Allowed: true, Max: 10, ResetAfter: 100 * time.Millisecond}},
		// At 112 ms every unit has expired.
		{112, 10, redlimit.Result{Allowed: true, Max: 10, ResetAfter: 100 * time.Millisecond}},
	}
	for _, st := range steps {
		at(st.at)
		got, err := s.AllowN(ctx, "k", lim, st.cost)
		if err != nil || got != st.want {
			t.Errorf("at %d ms, cost %d: %+v, %v; want %+v (as Redis answers)", st.at, st.cost, got, err, st.want)
		}
	}
}
