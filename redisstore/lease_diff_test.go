package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/model"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseDifferential applies random sequences of acquires, renews and
// releases (a lease held by another id, released twice, renewed after
// its expiry; limits at their bounds and changed between calls, slots
// lowered under held leases; the clock going back) to the memory store
// and to Redis with explicit time: every answer must be the same, and
// model.Leases'. A new lease never takes a key beyond its slots. The keys
// are rate limited too, between the lease calls: neither use disturbs
// the other.
func TestLeaseDifferential(t *testing.T) {
	limits := []redlimit.Concurrency{
		redlimit.InFlight(1, redlimit.MinLeaseTTL),
		redlimit.InFlight(2, time.Second),
		redlimit.InFlight(3, 3*time.Second),
		redlimit.InFlight(redlimit.MaxSlots, redlimit.MaxLeaseTTL),
	}
	const guard = 100 * time.Millisecond
	// The last is longer than a hash tag keeps (Redis hashes it).
	keys := []string{"a", "{b}", "c:\n", strings.Repeat("{d}", 1000)}
	rate := redlimit.Per(3, time.Second).FixedWindow()
	ids := []string{"x", "y", "z", "\x00", "{a}", strings.Repeat("é", redlimit.MaxLeaseIDLen/2)}
	for i := range 10 {
		ids = append(ids, fmt.Sprint(i)) // many leases on a key at once
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 29))
			clock := newPacedClock(redlimittest.T0.Add(654321 * time.Microsecond))
			mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)))
			ctx := context.Background()
			var history []string
			fatalf := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d: %s\nlast operations:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-25):], "\n"))
			}
			lm := model.Leases{}
			var held, denied int
			for range 1500 {
				// Redis expires a lease key by its own clock: each call is
				// guard later than the last, so a slow call or a step back
				// never sees a key expire before its last lease does.
				clock.keepUp()
				clock.Advance(guard)
				clock.wander(rng, 300*time.Millisecond)
				c := limits[rng.IntN(len(limits))]
				key := keys[rng.IntN(len(keys))]
				id := ids[rng.IntN(len(ids))]
				op := []string{"acquire", "acquire", "renew", "release", "allow"}[rng.IntN(5)]
				var ml, rl redlimit.Lease
				var merr, rerr error
				switch op {
				case "allow":
					mr, merr := mem.AllowN(ctx, key, rate, 1)
					rr, rerr := rs.AllowN(ctx, key, rate, 1)
					history = append(history, fmt.Sprintf("%s allow %q: %+v", clock.Now().Format(time.StampMicro), key, mr))
					if merr != nil || rerr != nil || mr != rr {
						fatalf("allow: memory %+v, %v; redis %+v, %v", mr, merr, rr, rerr)
					}
					continue
				case "acquire":
					ml, merr = mem.Acquire(ctx, key, c, id)
					rl, rerr = rs.Acquire(ctx, key, c, id)
				case "renew":
					ml, merr = mem.Renew(ctx, key, c, id)
					rl, rerr = rs.Renew(ctx, key, c, id)
				default:
					merr = mem.Release(ctx, key, c, id)
					rerr = rs.Release(ctx, key, c, id)
				}
				history = append(history, fmt.Sprintf("%s %s %q %+v %q: %+v", clock.Now().Format(time.StampMicro), op, key, c, id, ml))
				if merr != nil || rerr != nil || ml != rl {
					fatalf("%s: memory %+v, %v; redis %+v, %v", op, ml, merr, rl, rerr)
				}
				isNew := !lm.Holds(key, id, clock.Now())
				if want := lm.Do(op, key, c, id, clock.Now()); op != "release" && ml != want {
					fatalf("%s: the stores %+v, the model %+v", op, ml, want)
				}
				if op == "acquire" && isNew && ml.Held && ml.InFlight > c.Slots {
					fatalf("a new lease took the key to %d in flight, %d slots", ml.InFlight, c.Slots)
				}
				if ml.Held {
					held++
				} else if op == "acquire" {
					denied++
				}
			}
			if held < 200 || denied < 50 {
				t.Errorf("seed %d: only %d held, %d denied: the sequence tests little", seed, held, denied)
			}
		})
	}
}
