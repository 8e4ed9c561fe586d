package memory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseRecordWhenFull: a holder stalls past its TTL, and a new lease
// takes its room in a full store. RecordLease of the holder, which still
// runs, is counted all the same, as a debit is. So a new acquire on its
// key finds its one slot taken, once the store has room again.
func TestLeaseRecordWhenFull(t *testing.T) {
	long := strings.Repeat("k", 1000)
	cases := []struct {
		name string
		opt  memory.Option
		key  string // a prefix of each key
	}{
		{"leases_bound", memory.WithMaxKeys(2), ""},
		// A lease on a 1000-byte key takes about 1400 bytes: two fit.
		{"bytes_bound", memory.WithMaxBytes(3800), long},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := redlimittest.NewClock(redlimittest.T0)
			s := newStore(t, tc.opt, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			ctx := context.Background()
			short, hour := redlimit.InFlight(1, time.Second), redlimit.InFlight(1, time.Hour)
			acquire := func(key string, c redlimit.Concurrency, id string) redlimit.Lease {
				t.Helper()
				l, err := s.Acquire(ctx, tc.key+key, c, id)
				if err != nil {
					t.Fatalf("Acquire %s %s: %v", key, id, err)
				}
				return l
			}
			if !acquire("a", short, "stalled").Held || !acquire("b", hour, "b").Held {
				t.Fatal("the first two leases are not held")
			}
			clock.Advance(2 * time.Second) // "stalled" expires; its holder runs on
			if !acquire("c", hour, "c").Held {
				t.Fatal("a lease in the expired one's room is not held")
			}
			l, err := redlimit.RecordLease(ctx, s, tc.key+"a", short, "stalled")
			if err != nil || !l.Held {
				t.Fatalf("RecordLease of a running holder in a full store: %+v, %v; want held", l, err)
			}
			if err := s.Release(ctx, tc.key+"c", hour, "c"); err != nil {
				t.Fatal(err)
			}
			if l := acquire("a", short, "new"); l.Held {
				t.Fatalf("a new lease on the running holder's one slot: %+v; want refused", l)
			}
		})
	}
}
