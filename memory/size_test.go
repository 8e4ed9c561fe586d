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

// TestSizeEstimate: what WithMaxBytes counts is what the heap grows by, for
// each algorithm, with short keys (where the per-key overhead weighs most)
// and with sliding logs whose buffers hold a thousand timestamps.
func TestSizeEstimate(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		keys  int
		limit redlimit.Limit
		cost  int64 // per key, one request at a time
		admit bool  // by Admit, whose token buckets keep a refund record
	}{
		{"fixed_window", 20_000, redlimit.PerHour(10).FixedWindow(), 1, false},
		{"sliding_window", 20_000, redlimit.PerHour(10).SlidingWindow(), 1, false},
		{"token_bucket", 20_000, redlimit.PerHour(10).TokenBucket(10), 1, false},
		{"token_bucket_admit", 20_000, redlimit.PerHour(10).TokenBucket(10), 1, true},
		{"sliding_log", 20_000, redlimit.PerHour(10).SlidingLog(), 1, false},
		{"sliding_log_1000", 100, redlimit.PerHour(1000).SlidingLog(), 1000, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := redlimittest.NewClock(redlimittest.T0)
			s := newStore(t, memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			before := heapInUse()
			for i := range c.keys {
				k := fmt.Sprintf("key:%012d", i) // 16 bytes, kept by the store
				for range c.cost {
					clock.Advance(time.Microsecond)
					if c.admit {
						if g, err := s.Admit(ctx, []redlimit.Request{{Key: k, Limit: c.limit, Cost: 1}}); err != nil || !g.Allowed {
							t.Fatalf("%+v, %v", g, err)
						}
					} else if r, err := s.AllowN(ctx, k, c.limit, 1); err != nil || !r.Allowed {
						t.Fatalf("%+v, %v", r, err)
					}
				}
			}
			grown := float64(heapInUse() - before)
			est := float64(s.Stats().Bytes)
			t.Logf("%d keys: heap +%.0f bytes (%.1f a key), estimate %.0f (%.1f a key)", c.keys, grown, grown/float64(c.keys), est, est/float64(c.keys))
			if est < 0.85*grown || est > 1.15*grown {
				t.Errorf("estimate %.0f bytes, the heap grew by %.0f", est, grown)
			}
		})
	}
}
