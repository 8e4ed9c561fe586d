package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseDifferential applies random sequences of acquires, renews and
// releases, under limits whose slots and TTL change, to the memory store
// and to Redis at one explicit time: every answer must be the same.
func TestLeaseDifferential(t *testing.T) {
	limits := []redlimit.Concurrency{
		redlimit.InFlight(1, 50*time.Millisecond),
		redlimit.InFlight(2, 300*time.Millisecond),
		redlimit.InFlight(3, time.Second),
		redlimit.InFlight(4, 120*time.Millisecond),
	}
	keys := []string{"a", "{b}", "c:\n"}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 29))
			clock := redlimittest.NewClock(redlimittest.T0.Add(777 * time.Microsecond))
			mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			// Redis keeps keys an hour past their last lease: the scores,
			// not the key's expiry, say which leases hold.
			rs := d.store(t, redisstore.WithPrefix(prefix(t)), redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour))
			stores := []redlimit.Semaphore{mem, rs}
			ctx := context.Background()
			for step := range 400 {
				clock.Advance(time.Duration(rng.IntN(3)) * time.Duration(rng.IntN(80_000)) * time.Microsecond)
				key, c := keys[rng.IntN(len(keys))], limits[rng.IntN(len(limits))]
				id := fmt.Sprint(rng.IntN(6))
				op := rng.IntN(3)
				var got [2]redlimit.Lease
				for i, s := range stores {
					var err error
					switch op {
					case 0:
						got[i], err = s.Acquire(ctx, key, c, id)
					case 1:
						got[i], err = s.Renew(ctx, key, c, id)
					default:
						err = s.Release(ctx, key, c, id)
					}
					if err != nil {
						t.Fatalf("seed %d step %d: op %d: %v", seed, step, op, err)
					}
				}
				if got[0] != got[1] {
					t.Fatalf("seed %d step %d: op %d key %q %+v id %s: memory %+v, redis %+v", seed, step, op, key, c, id, got[0], got[1])
				}
			}
		})
	}
}
