package reserve_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/reserve"
)

// TestRandomLifecycleCharges reserves over a few keys (one to three
// requests a reservation), and settles, releases, expires and settles late
// at random, with double settles and releases mixed in. The store's clock
// stands still (the Ledger's moves), so every unit must be accounted for:
// after all, each key has counted exactly the sum of what its requests
// count by the documented rules (an estimate while pending, nothing
// once released or expired, the real cost once settled, clamped to
// MaxCost, the estimate for a negative one).
func TestRandomLifecycleCharges(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storeClock, ledgerClock := newClock(), newClock()
			prefix := uniq()
			s := b.make(t, prefix, storeClock.Now)
			l := newLedger(t, s, reserve.Options{Now: ledgerClock.Now, Timeout: time.Minute})
			lim := redlimit.PerHour(redlimit.MaxCount).FixedWindow()
			keys := []string{"a", "b", "c", "d"}
			want := map[string]int64{}
			type res struct {
				r       *reserve.Reservation
				keys    []string
				est     []int64
				state   string // pending, done, expired
				counted []int64
			}
			var all []*res
			rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
			cost := func(est int64) int64 {
				switch rng.IntN(8) {
				case 0:
					return -1 - rng.Int64N(100)
				case 1:
					return 0
				case 2:
					return est
				case 3:
					return est + 1 + rng.Int64N(1000)
				default:
					return rng.Int64N(est + 1)
				}
			}
			for step := range 400 {
				switch k := rng.IntN(10); {
				case k < 3:
					n := 1 + rng.IntN(3)
					perm := rng.Perm(len(keys))[:n]
					var reqs []redlimit.Request
					x := &res{state: "pending"}
					for _, p := range perm {
						e := 1 + rng.Int64N(500)
						reqs = append(reqs, redlimit.Request{Key: keys[p], Limit: lim, Cost: e})
						x.keys = append(x.keys, keys[p])
						x.est = append(x.est, e)
					}
					r, err := l.ReserveAll(t.Context(), reqs)
					if err != nil {
						t.Fatal(err)
					}
					if !r.OK() {
						t.Fatalf("step %d: denied", step)
					}
					x.r = r
					x.counted = append([]int64(nil), x.est...)
					all = append(all, x)
				case k < 6 && len(all) > 0:
					x := all[rng.IntN(len(all))]
					act := make([]int64, len(x.est))
					for i := range act {
						act[i] = cost(x.est[i])
					}
					err := x.r.SettleEach(t.Context(), act)
					switch x.state {
					case "done":
						if !errors.Is(err, reserve.ErrSettled) {
							t.Fatalf("step %d: second settle: %v", step, err)
						}
						continue
					case "expired":
						if !errors.Is(err, reserve.ErrExpired) {
							t.Fatalf("step %d: late settle: %v", step, err)
						}
					}
					for i, a := range act {
						switch {
						case a < 0:
							x.counted[i] = x.est[i]
						default:
							x.counted[i] = min(a, redlimit.MaxCost)
						}
					}
					x.state = "done"
				case k < 8 && len(all) > 0:
					x := all[rng.IntN(len(all))]
					if err := x.r.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
					if x.state == "pending" || x.state == "expired" {
						for i := range x.counted {
							x.counted[i] = 0
						}
					}
					x.state = "done"
				default:
					ledgerClock.Advance(time.Duration(rng.IntN(40)) * time.Second)
					now := ledgerClock.Now()
					l.ReleaseExpired()
					for _, x := range all {
						if x.state == "pending" && !x.r.Deadline().After(now) {
							x.state = "expired"
							for i := range x.counted {
								x.counted[i] = 0
							}
						}
					}
				}
			}
			for _, x := range all {
				for i, k := range x.keys {
					want[k] += x.counted[i]
				}
			}
			if got := l.Pending(); got != countPending(all, func(x *res) bool { return x.state == "pending" }) {
				t.Errorf("Pending() = %d", got)
			}
			for _, k := range keys {
				if got := used(t, s, k, lim); got != want[k] {
					t.Errorf("key %s: store counts %d, want %d", k, got, want[k])
				}
			}
		})
	}
}

func countPending[T any](all []T, f func(T) bool) int {
	n := 0
	for _, x := range all {
		if f(x) {
			n++
		}
	}
	return n
}

// TestConcurrentSettleRelease races Settle, Release, a second Settle and
// the Ledger's expiry on each reservation: exactly one of them takes
// effect, and the store counts what it says.
func TestConcurrentSettleRelease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storeClock := newClock()
			var mu sync.Mutex
			lt := t0
			ledgerNow := func() time.Time { mu.Lock(); defer mu.Unlock(); return lt }
			s := b.make(t, uniq(), storeClock.Now)
			l := newLedger(t, s, reserve.Options{Now: ledgerNow, Timeout: time.Minute})
			lim := redlimit.PerHour(redlimit.MaxCount).FixedWindow()
			const n = 200
			var want int64
			var wmu sync.Mutex
			var wg sync.WaitGroup
			for i := range n {
				r, err := l.Reserve(t.Context(), "k", lim, 100)
				if err != nil || !r.OK() {
					t.Fatal(r, err)
				}
				var settled [2]bool
				var expiredErr [2]bool
				wg.Add(3)
				for j := range 2 {
					go func() {
						defer wg.Done()
						err := r.Settle(t.Context(), int64(30+j*100))
						switch {
						case err == nil:
							settled[j] = true
						case errors.Is(err, reserve.ErrExpired):
							settled[j], expiredErr[j] = true, true
						case errors.Is(err, reserve.ErrSettled):
						default:
							t.Error(err)
						}
					}()
				}
				go func() {
					defer wg.Done()
					if i%2 == 0 {
						r.Release(t.Context())
					} else {
						mu.Lock()
						lt = lt.Add(2 * time.Minute)
						mu.Unlock()
						l.ReleaseExpired()
					}
				}()
				wg.Wait()
				if settled[0] && settled[1] {
					t.Fatalf("reservation %d settled twice", i)
				}
				wmu.Lock()
				for j := range 2 {
					if settled[j] {
						want += int64(30 + j*100)
					}
				}
				wmu.Unlock()
			}
			if got := used(t, s, "k", lim); got != want {
				t.Errorf("store counts %d, want %d", got, want)
			}
			if p := l.Pending(); p != 0 {
				t.Errorf("%d pending", p)
			}
		})
	}
}
