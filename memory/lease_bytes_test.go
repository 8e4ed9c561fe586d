package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseBytesBound: leases count in WithMaxBytes, keys and ids
// included. A hostile client's leases on long keys fill the bound, then
// Acquire of a new lease fails with ErrFull; held leases renew, and
// releasing gives the room back.
func TestLeaseBytesBound(t *testing.T) {
	const bound = 64 << 10
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithMaxBytes(bound), memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	ctx := context.Background()
	c := redlimit.InFlight(redlimit.MaxSlots, time.Second)
	id := strings.Repeat("i", redlimit.MaxLeaseIDLen)
	key := func(i int) string { return fmt.Sprintf("%06d", i) + strings.Repeat("k", 16<<10) }
	held := 0
	for i := range 64 {
		l, err := s.Acquire(ctx, key(i), c, id)
		if errors.Is(err, memory.ErrFull) {
			break
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
}
