package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// TestExactUnderConcurrency runs 4 stores, each with its own client, and 64
// goroutines per store on one key: exactly the limit must be admitted.
func TestExactUnderConcurrency(t *testing.T) {
	const (
		instances = 4
		workers   = 64
		tries     = 4
		limit     = 200
	)
	limits := []redlimit.Limit{
		redlimit.Per(limit, time.Hour).SlidingLog(),
		// Windows of the longest period: no boundary falls inside the test.
		redlimit.Per(limit, redlimit.MaxPeriod).FixedWindow(),
		redlimit.Per(limit, redlimit.MaxPeriod).SlidingWindow(), // exact: its previous window is empty
		redlimit.Per(1, time.Hour).TokenBucket(limit),           // refills one token an hour
	}
	clocks := []struct {
		name string
		opt  func() []redisstore.Option
	}{
		{"server-time", func() []redisstore.Option { return nil }},
		// Every request at the same microsecond: sliding-log members must
		// still be distinct.
		{"one-instant", func() []redisstore.Option {
			at := time.Now()
			return []redisstore.Option{redisstore.WithClock(func() time.Time { return at })}
		}},
	}
	for _, d := range deployments {
		for _, clk := range clocks {
			t.Run(d.name+"/"+clk.name, func(t *testing.T) {
				t.Parallel()
				p := prefix(t)
				stores := make([]*redisstore.Store, instances)
				for i := range stores {
					stores[i] = d.store(t, append(clk.opt(), redisstore.WithPrefix(p))...)
				}
				for _, l := range limits {
					var admitted, calls atomic.Int64
					var wg sync.WaitGroup
					for _, s := range stores {
						for range workers {
							wg.Go(func() {
								for range tries {
									r, err := s.AllowN(context.Background(), "hot", l, 1)
									if err != nil {
										t.Error(err)
										return
									}
									calls.Add(1)
									if r.Allowed {
										admitted.Add(1)
									}
								}
							})
						}
					}
					wg.Wait()
					if got := admitted.Load(); got != limit {
						t.Errorf("%s: admitted %d of %d calls, want exactly %d", l, got, calls.Load(), limit)
					}
				}
			})
		}
	}
}
