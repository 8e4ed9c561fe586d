package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseBytesBound: leases count in WithMaxBytes, keys and ids
// included. A hostile client's leases on long keys fill the bound, then
// Acquire of a new lease is denied; held leases renew, and releasing
// gives the room back.
func TestLeaseBytesBound(t *testing.T) {
	const bound = 64 << 10
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithMaxBytes(bound), memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	ctx := context.Background()
	c := redlimit.InFlight(1, time.Second) // MaxSlots would be a record (RecordLease)
	id := strings.Repeat("i", redlimit.MaxLeaseIDLen)
	key := func(i int) string { return fmt.Sprintf("%06d", i) + strings.Repeat("k", 16<<10) }
	held := 0
	for i := range 64 {
		l, err := s.Acquire(ctx, key(i), c, id)
		if err == nil && !l.Held && l.RetryAfter > 0 {
			break // full
		}
		if err != nil || !l.Held {
			t.Fatalf("Acquire %d: %+v, %v", i, l, err)
		}
		held++
		if b := s.Stats().Bytes; b > bound {
			t.Fatalf("%d leases on 16 KiB keys: %d bytes held, bound %d", held, b, bound)
		}
	}
	if held == 64 || held == 0 {
		t.Fatalf("%d leases of 64 held on 16 KiB keys, bound %d bytes", held, bound)
	}
	if l, err := s.Acquire(ctx, key(0), c, id); err != nil || !l.Held {
		t.Fatalf("renewing a held lease when full: %+v, %v", l, err)
	}
	for i := range held {
		if err := s.Release(ctx, key(i), c, id); err != nil {
			t.Fatal(err)
		}
	}
	if b := s.Stats().Bytes; b != 0 {
		t.Fatalf("all released: %d bytes held", b)
	}
	// Expired leases give their room back too.
	for i := range held {
		if l, err := s.Acquire(ctx, key(i), c, id); err != nil || !l.Held {
			t.Fatalf("Acquire %d again: %+v, %v", i, l, err)
		}
	}
	clock.Advance(2 * time.Second)
	if l, err := s.Acquire(ctx, key(held), c, id); err != nil || !l.Held {
		t.Fatalf("after the others expired: %+v, %v", l, err)
	}
	// A key longer than the bound never fits.
	if l, err := s.Acquire(ctx, strings.Repeat("k", bound), c, id); err != nil || l.Held || l.RetryAfter != redlimit.Never {
		t.Fatalf("a key longer than the bound: %+v, %v; want denied for ever", l, err)
	}
}

// TestLeaseSizeEstimate: what WithMaxBytes counts for leases is what the
// heap grows by: one lease on each of many keys, and many on one key.
func TestLeaseSizeEstimate(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name       string
		keys, each int
	}{
		{"a_lease_a_key", 20_000, 1},
		{"leases_on_one_key", 1, 20_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, memory.WithSweepInterval(0))
			c := redlimit.InFlight(redlimit.MaxSlots, time.Hour)
			before := heapInUse()
			for i := range tc.keys {
				k := fmt.Sprintf("key:%012d", i) // 16 bytes, kept by the store
				for range tc.each {
					// 32 bytes, kept by the store too.
					if l, err := s.Acquire(ctx, k, c, redlimit.NewLeaseID()); err != nil || !l.Held {
						t.Fatalf("%+v, %v", l, err)
					}
				}
			}
			grown := float64(heapInUse() - before)
			est := float64(s.Stats().Bytes)
			n := float64(tc.keys * tc.each)
			t.Logf("%d leases: heap +%.0f bytes (%.1f a lease), estimate %.0f (%.1f a lease)", int(n), grown, grown/n, est, est/n)
			if est < 0.85*grown || est > 1.15*grown {
				t.Errorf("estimate %.0f bytes, the heap grew by %.0f", est, grown)
			}
		})
	}
}

// TestLeaseBytesConcurrent: 32 goroutines acquire and release leases on
// long keys of a small store, with rate decisions between. The bytes never
// pass the bound, no call fails, and all released and swept, the store
// holds nothing.
func TestLeaseBytesConcurrent(t *testing.T) {
	const bound = 32 << 10
	s := newStore(t, memory.WithMaxBytes(bound), memory.WithSweepInterval(0))
	c := redlimit.InFlight(2, time.Minute)
	rate := redlimit.Per(1000, time.Millisecond).FixedWindow()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 100 {
				key := fmt.Sprintf("%02d", (g+i)%40) + strings.Repeat("k", 2000)
				id := fmt.Sprint(g)
				l, err := s.Acquire(ctx, key, c, id)
				if err != nil {
					t.Error(err)
					return
				}
				if !l.Held {
					refused.Add(1)
				}
				if b := s.Stats().Bytes; b > bound {
					t.Errorf("%d bytes, bound %d", b, bound)
					return
				}
				if _, err := s.AllowN(ctx, key, rate, 1); err != nil {
					t.Error(err)
					return
				}
				if err := s.Release(ctx, key, c, id); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Error("no lease refused: the store was never full")
	}
	time.Sleep(5 * time.Millisecond) // the rate windows end
	s.Sweep()
	if b := s.Stats().Bytes; b != 0 {
		t.Fatalf("all released and swept: %d bytes held (%d refused)", b, refused.Load())
	}
}

// TestLeaseBytesAfterShrink: a key's leases come and go. A key that held
// many leases, and holds one now, takes what one lease does in the heap.
// Else WithMaxBytes bounds the leases held, not the memory: each key
// keeps the room of the most it ever held.
func TestLeaseBytesAfterShrink(t *testing.T) {
	const keys, each = 1000, 100
	s := newStore(t, memory.WithSweepInterval(0))
	ctx := context.Background()
	c := redlimit.InFlight(each, time.Hour)
	before := heapInUse()
	for i := range keys {
		k := fmt.Sprintf("key:%012d", i)
		for j := range each {
			if l, err := s.Acquire(ctx, k, c, fmt.Sprint(j)); err != nil || !l.Held {
				t.Fatalf("%+v, %v", l, err)
			}
		}
		for j := 1; j < each; j++ {
			if err := s.Release(ctx, k, c, fmt.Sprint(j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	grown, est := float64(heapInUse()-before), float64(s.Stats().Bytes)
	t.Logf("%d keys of one lease, each once of %d: heap +%.0f bytes, estimate %.0f", keys, each, grown, est)
	if grown > 2*est {
		t.Errorf("the heap grew by %.0f bytes, %.1f times the estimate %.0f", grown, grown/est, est)
	}
}

// TestLeaseEdges: the clock going back and forth under held leases, a
// bound smaller than one lease, and the largest TTL and slots.
func TestLeaseEdges(t *testing.T) {
	ctx := context.Background()
	id := strings.Repeat("i", redlimit.MaxLeaseIDLen)
	t.Run("clock back while full", func(t *testing.T) {
		clock := redlimittest.NewClock(redlimittest.T0)
		s := newStore(t, memory.WithMaxKeys(2), memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		c := redlimit.InFlight(5, time.Second)
		clock.Advance(time.Hour)
		for _, id := range []string{"a", "b"} {
			if l, err := s.Acquire(ctx, "k", c, id); err != nil || !l.Held {
				t.Fatalf("Acquire %s: %+v, %v", id, l, err)
			}
		}
		clock.Advance(-time.Hour)
		// Held until the clock reaches their expiry again.
		if l, err := s.Acquire(ctx, "j", c, "c"); err != nil || l.Held || l.RetryAfter != time.Hour+time.Second {
			t.Fatalf("full, clock back an hour: %+v, %v; want denied for 1h1s", l, err)
		}
		clock.Advance(time.Hour + 2*time.Second)
		if l, err := s.Acquire(ctx, "j", c, "c"); err != nil || !l.Held || l.InFlight != 1 {
			t.Fatalf("clock past their expiry: %+v, %v", l, err)
		}
		// A later clock going back does not hide a lease's expiry.
		clock.Advance(-time.Hour)
		if l, err := s.Acquire(ctx, "k", c, "d"); err != nil || !l.Held {
			t.Fatalf("a second lease: %+v, %v", l, err)
		}
		clock.Advance(time.Hour + 2*time.Second)
		for _, id := range []string{"e", "f"} {
			if l, err := s.Acquire(ctx, "m", c, id); err != nil || !l.Held {
				t.Fatalf("Acquire %s after all expired: %+v, %v", id, l, err)
			}
		}
	})
	t.Run("release after expiry", func(t *testing.T) {
		clock := redlimittest.NewClock(redlimittest.T0)
		s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		c := redlimit.InFlight(redlimit.MaxSlots-1, redlimit.MaxLeaseTTL)
		for _, id := range []string{"a", id} {
			if l, err := s.Acquire(ctx, "k", c, id); err != nil || !l.Held {
				t.Fatalf("Acquire %s: %+v, %v", id, l, err)
			}
		}
		clock.Advance(redlimit.MaxLeaseTTL)
		if err := s.Release(ctx, "k", c, "a"); err != nil {
			t.Fatal(err)
		}
		if l, err := s.Renew(ctx, "k", c, id); err != nil || l.Held || l.InFlight != 0 {
			t.Fatalf("Renew after expiry: %+v, %v", l, err)
		}
		if b := s.Stats().Bytes; b != 0 {
			t.Fatalf("released and renewed after expiry: %d bytes held", b)
		}
	})
	t.Run("bound below one lease", func(t *testing.T) {
		s := newStore(t, memory.WithMaxBytes(100), memory.WithSweepInterval(0))
		for _, slots := range []int64{1, redlimit.MaxSlots} {
			c := redlimit.InFlight(slots, redlimit.MaxLeaseTTL)
			if l, err := s.Acquire(ctx, "k", c, id); err != nil || l.Held || l.RetryAfter != redlimit.Never {
				t.Fatalf("%d slots: %+v, %v; want denied for ever", slots, l, err)
			}
		}
		if st := s.Stats(); st.Refused != 2 || st.Bytes != 0 {
			t.Fatalf("%+v: want 2 refused, 0 bytes", st)
		}
	})
}

// TestLeaseSweepConcurrent: Sweep runs beside acquires, renewals and
// releases on a clock that moves. No key holds more than its slots, and
// the bytes come back to zero.
func TestLeaseSweepConcurrent(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithMaxKeys(20), memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	c := redlimit.InFlight(2, 50*time.Millisecond)
	stop := make(chan struct{})
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.Sweep()
				clock.Advance(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 300 {
				key, id := fmt.Sprint((g+i)%6), fmt.Sprint(g)
				l, err := s.Acquire(ctx, key, c, id)
				if err == nil && l.InFlight > c.Slots {
					err = fmt.Errorf("%d in flight of %d", l.InFlight, c.Slots)
				}
				if err == nil && i%3 == 0 {
					err = s.Release(ctx, key, c, id)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sweeper.Wait()
	clock.Advance(time.Second)
	s.Sweep()
	if b := s.Stats().Bytes; b != 0 {
		t.Fatalf("all expired and swept: %d bytes held", b)
	}
	if ls, _ := s.Leases(context.Background()); len(ls) != 0 {
		t.Fatalf("all expired and swept: %d leases listed", len(ls))
	}
}
