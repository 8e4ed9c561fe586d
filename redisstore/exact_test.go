package redisstore_test

import (
	"context"
	"strconv"
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
				opts := clk.opt() // one clock for every instance: one instant
				for i := range stores {
					stores[i] = d.store(t, append(opts, redisstore.WithPrefix(p))...)
				}
				for _, l := range limits {
					var admitted, calls atomic.Int64
					// Each admission takes one unit from what the others
					// left, whichever batch or entry it was decided in:
					// the admitted decisions' remainings are 0..limit-1,
					// each once (none of these limits gives a unit back
					// within the test).
					var seen [limit]atomic.Int32
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
										if r.Remaining < 0 || r.Remaining >= limit || seen[r.Remaining].Add(1) != 1 {
											t.Errorf("%s: an admission with remaining %d, which another had or is out of range", l, r.Remaining)
										}
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

// TestExactAllowAllUnderConcurrency runs 4 stores, each with its own
// client, and 64 goroutines per store deciding AllowAll on one identifier:
// an admission under a limit of 200 and one of 300, and a debit of a third
// limit far above the load. Exactly 200 decisions must be allowed, the
// 300 limit must have counted those and no more (admissions are all or
// nothing), and the debit must have been counted once per decision,
// whatever the batches the decisions shared.
func TestExactAllowAllUnderConcurrency(t *testing.T) {
	const (
		instances = 4
		workers   = 64
		tries     = 4
		limit     = 200
	)
	sets := [][3]redlimit.Limit{
		{redlimit.Per(limit, time.Hour).SlidingLog(), redlimit.Per(300, redlimit.MaxPeriod).FixedWindow(), redlimit.Per(1_000_000, redlimit.MaxPeriod).SlidingWindow()},
		{redlimit.Per(1, time.Hour).TokenBucket(limit), redlimit.Per(300, time.Hour).SlidingLog(), redlimit.Per(1_000_000, redlimit.MaxPeriod).FixedWindow()},
		{redlimit.Per(limit, redlimit.MaxPeriod).SlidingWindow(), redlimit.Per(1, time.Hour).TokenBucket(300), redlimit.Per(1, 30*time.Minute).TokenBucket(1_000_000)},
	}
	for _, d := range []deployment{deployments[0], deployments[2], deployments[3]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			stores := make([]*redisstore.Store, instances)
			for i := range stores {
				stores[i] = d.store(t, redisstore.WithPrefix(p))
			}
			for i, ls := range sets {
				id := "hot" + strconv.Itoa(i)
				reqs := []redlimit.Request{
					{Key: id, Limit: ls[0], Cost: 1},
					{Key: id, Limit: ls[1], Cost: 1},
					{Key: id, Limit: ls[2], Cost: 1, Debit: true},
				}
				var admitted, calls atomic.Int64
				var wg sync.WaitGroup
				for _, s := range stores {
					for range workers {
						wg.Go(func() {
							for range tries {
								dec, err := s.AllowAll(context.Background(), reqs)
								if err != nil {
									t.Error(err)
									return
								}
								calls.Add(1)
								if dec.Allowed {
									admitted.Add(1)
								}
							}
						})
					}
				}
				wg.Wait()
				if got := admitted.Load(); got != limit {
					t.Errorf("%s: admitted %d of %d calls, want exactly %d", ls[0], got, calls.Load(), limit)
				}
				for i, want := range []int64{limit, calls.Load()} {
					l := ls[i+1]
					r, err := stores[0].Peek(context.Background(), id, l, 1)
					if err != nil {
						t.Fatal(err)
					}
					if used := l.Max() - r.Remaining - 1; used != want {
						t.Errorf("%s: counted %d, want %d", l, used, want)
					}
				}
			}
		})
	}
}
