package memory_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseBadInput: bad input is a clear error.
func TestLeaseBadInput(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	cases := []struct {
		key  string
		c    redlimit.Concurrency
		id   string
		want error
	}{
		{"", redlimit.InFlight(1, time.Second), "a", redlimit.ErrInvalidKey},
		{"k", redlimit.InFlight(0, time.Second), "a", redlimit.ErrInvalidConcurrency},
		{"k", redlimit.InFlight(1, 0), "a", redlimit.ErrInvalidConcurrency},
		{"k", redlimit.InFlight(1, 48*time.Hour), "a", redlimit.ErrInvalidConcurrency},
		{"k", redlimit.InFlight(1, time.Second), "", redlimit.ErrInvalidLeaseID},
	}
	for _, tc := range cases {
		if _, err := s.Acquire(ctx, tc.key, tc.c, tc.id); !errors.Is(err, tc.want) {
			t.Errorf("Acquire(%q, %+v, %q): %v, want %v", tc.key, tc.c, tc.id, err, tc.want)
		}
	}
}

// TestLeaseFull: the store holds at most its WithMaxKeys bound of
// leases; a new one past it is denied until the first expires; expired
// ones make room.
func TestLeaseFull(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithMaxKeys(2), memory.WithClock(clock.Now))
	ctx := context.Background()
	c := redlimit.InFlight(5, time.Second)
	for _, id := range []string{"a", "b"} {
		if l, err := s.Acquire(ctx, "k", c, id); err != nil || !l.Held {
			t.Fatalf("Acquire %s: %+v, %v", id, l, err)
		}
	}
	if l, err := s.Acquire(ctx, "j", c, "c"); err != nil || l.Held || l.RetryAfter != time.Second || s.Stats().Refused != 1 {
		t.Fatalf("third lease: %+v, %v, refused %d; want denied for 1s", l, err, s.Stats().Refused)
	}
	if l, err := s.Acquire(ctx, "k", c, "a"); err != nil || !l.Held {
		t.Fatalf("renewing a held lease when full: %+v, %v", l, err)
	}
	clock.Advance(2 * time.Second)
	if l, err := s.Acquire(ctx, "j", c, "c"); err != nil || !l.Held || l.InFlight != 1 {
		t.Fatalf("after expiry: %+v, %v", l, err)
	}
}

// TestLeaseConcurrent: 64 goroutines never hold more than N slots.
func TestLeaseConcurrent(t *testing.T) {
	s := newStore(t)
	const n = 3
	c := redlimit.InFlight(n, time.Minute)
	var in, most atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for range 50 {
				id := redlimit.NewLeaseID()
				l, err := s.Acquire(ctx, "k", c, id)
				if err != nil {
					t.Error(err)
					return
				}
				if !l.Held {
					continue
				}
				x := in.Add(1)
				for m := most.Load(); x > m && !most.CompareAndSwap(m, x); m = most.Load() {
				}
				in.Add(-1)
				if err := s.Release(ctx, "k", c, id); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if most.Load() > n {
		t.Fatalf("%d in flight, limit %d", most.Load(), n)
	}
}

// TestLeases: Leases lists the leases held, each with its time left by
// the store's clock; expired and released ones are not listed.
func TestLeases(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now))
	ctx := context.Background()
	steps := []struct {
		key, id string
		ttl     time.Duration
		release bool
	}{
		{"k", "a", time.Second, false},
		{"k", "b", 3 * time.Second, false},
		{"j", "c", 2 * time.Second, false},
		{"j", "d", 2 * time.Second, true},
	}
	for _, st := range steps {
		c := redlimit.InFlight(5, st.ttl)
		if _, err := s.Acquire(ctx, st.key, c, st.id); err != nil {
			t.Fatal(err)
		}
		if st.release {
			if err := s.Release(ctx, st.key, c, st.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(1500 * time.Millisecond)
	got, err := s.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b memory.HeldLease) int { return strings.Compare(a.ID, b.ID) })
	want := []memory.HeldLease{{Key: "k", ID: "b", Left: 1500 * time.Millisecond}, {Key: "j", ID: "c", Left: 500 * time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Fatalf("Leases: %+v, want %+v", got, want)
	}
}
