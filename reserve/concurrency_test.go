package reserve_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/reserve"
)

// TestConcurrentLedgers: several stores on one Redis (standalone and
// Cluster; one memory store shared by several Ledgers), a Ledger each, and
// many goroutines reserving for a user and a tenant (two identifiers: two
// slots on Cluster) and settling below or at their estimate or releasing.
// Window counts give back exactly whatever the interleaving, so each key
// ends having used exactly the sum of what was settled.
func TestConcurrentLedgers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			prefix := uniq()
			var stores []redlimit.Refunder
			for i := range 3 {
				if i == 0 || b.shared {
					stores = append(stores, b.make(t, prefix, clock.Now))
				} else {
					stores = append(stores, stores[0])
				}
			}
			for _, lim := range []redlimit.Limit{redlimit.PerHour(1_000_000).FixedWindow(), redlimit.PerHour(1_000_000).SlidingWindow()} {
				var total atomic.Int64
				var wg sync.WaitGroup
				for i, s := range stores {
					l := newLedger(t, s, reserve.Options{Now: clock.Now})
					for g := range 4 {
						rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
						wg.Go(func() {
							for range 40 {
								est := 1 + rng.Int64N(50)
								r, err := l.ReserveAll(t.Context(), []redlimit.Request{
									{Key: "user:" + fmt.Sprint(g), Limit: lim, Cost: est},
									{Key: "tenant", Limit: lim, Cost: est},
								})
								if err != nil || !r.OK() {
									t.Errorf("reserve: %v", err)
									return
								}
								if rng.IntN(4) == 0 {
									if err := r.Release(t.Context()); err != nil {
										t.Error(err)
									}
									continue
								}
								actual := rng.Int64N(est + 1)
								if err := r.Settle(t.Context(), actual); err != nil {
									t.Error(err)
								}
								total.Add(actual)
							}
						})
					}
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatal("goroutines still reserving after 60 s")
				}
				if got := used(t, stores[0], "tenant", lim); got != total.Load() {
					t.Errorf("%s: the tenant used %d, want the %d settled", lim, got, total.Load())
				}
			}
		})
	}
}
