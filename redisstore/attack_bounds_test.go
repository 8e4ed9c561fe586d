package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestOperationsAtTheBounds: with the largest TTL margin and clocks at
// the bounds, every operation (AllowN, Peek, AllowAll, Admit, Refund,
// DebitOnce, Reset) on the longest limits and a 10 KB identifier runs
// without an error.
func TestOperationsAtTheBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	big := redlimit.Per(redlimit.MaxCost, redlimit.MaxPeriod)
	limits := []redlimit.Limit{big.FixedWindow(), big.SlidingWindow(), redlimit.Per(100000, redlimit.MaxPeriod).SlidingLog(), redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1), redlimit.PerSecond(1).SlidingLog()}
	for _, at := range []time.Time{time.UnixMicro(0), today, lastInstant} {
		for _, margin := range []time.Duration{0, redlimit.MaxPeriod} {
			clock := redlimittest.NewClock(at)
			s := standalone[0].store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(margin), redisstore.WithPrefix(prefix(t)))
			for _, key := range []string{"k", strings.Repeat("\xff{%#}", 2000)} {
				for _, l := range limits {
					fail := func(what string, err error) {
						t.Helper()
						if err != nil {
							t.Errorf("at %d, margin %s, %s, key of %d bytes: %s: %v", at.UnixMicro(), margin, l, len(key), what, err)
						}
					}
					cost := l.Max()
					_, err := s.AllowN(ctx, key, l, 1)
					fail("AllowN", err)
					_, err = s.Peek(ctx, key, l, cost)
					fail("Peek", err)
					g, err := s.Admit(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 1}})
					fail("Admit", err)
					if err == nil {
						fail("Refund", s.Refund(ctx, g, []int64{1}))
					}
					_, _, err = s.DebitOnce(ctx, redlimit.Request{Key: key, Limit: l, Cost: cost}, strings.Repeat("i", redisstore.MaxIDLen))
					fail("DebitOnce", err)
					_, _, err = s.DebitOnce(ctx, redlimit.Request{Key: key, Limit: l, Cost: cost}, strings.Repeat("i", redisstore.MaxIDLen))
					fail("DebitOnce again", err)
					_, err = s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 1}, {Key: key + "2", Limit: l, Cost: cost, Debit: true}})
					fail("AllowAll", err)
					fail("Reset", s.Reset(ctx, key, l))
				}
			}
		}
	}
}
