package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestDifferential applies long random sequences of (time, key, limit,
// cost) to the memory store and to Redis with explicit time: every answer
// must be the same. The time mostly moves forward, sometimes steps back;
// limits change count or burst under existing state; costs go up to the
// limit and a little above. The host's clock, which Redis's calendar
// windows are sent by, is mostly skewed from the explicit time, by up to
// an hour either way.
func TestDifferential(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(5, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(7, time.Second).SlidingLog(),
		redlimit.Per(10, time.Second).SlidingWindow(),
		redlimit.Per(3, 70*time.Millisecond).SlidingWindow(),
		redlimit.Per(3, time.Second).TokenBucket(4),
		redlimit.Per(7, 100*time.Millisecond).TokenBucket(2),
		redlimit.PerCalendar(6, redlimit.Day, "Europe/Berlin"),
		redlimit.PerCalendar(4, redlimit.Day, "Australia/Lord_Howe"),
	}
	// Variants share each limit's state (same algorithm and period) with
	// another count or burst.
	variant := func(rng *rand.Rand, l redlimit.Limit) redlimit.Limit {
		switch rng.IntN(3) {
		case 0:
			l.Count = max(1, l.Count/2)
		case 1:
			l.Count = 2*l.Count + 1
		}
		if l.Algorithm == redlimit.TokenBucket {
			l.Burst = 1 + rng.Int64N(2*l.Burst)
		}
		return l
	}
	keys := []string{"a", "b", "{c}", "d:\n"}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 7))
			start := redlimittest.T0.Add(123456 * time.Microsecond)
			clock := newPacedClock(start)
			// No sweeps, and Redis keeps keys ten minutes longer than their
			// times say: after a step back, both stores still hold what the
			// explicit time says is there.
			mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			var skew time.Duration
			host := func() time.Time { return clock.Now().Add(skew) }
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithHostClock(host), redisstore.WithPrefix(prefix(t)), redisstore.WithTTLMargin(10*time.Minute))
			ctx := context.Background()
			var allowed, denied, back int
			var history []string // what was done, printed on a mismatch
			fatalf := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s\nlast operations:\n%s", fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-25):], "\n"))
			}
			for i := range 3000 {
				l := limits[rng.IntN(len(limits))]
				if rng.IntN(6) == 0 {
					l = variant(rng, l)
				}
				key := keys[rng.IntN(len(keys))]
				// Steps from 0 to a tenth of the period, in whole microseconds,
				// mostly 0 so that requests share an instant and limits fill;
				// now and then back, by up to half the period.
				clock.keepUp()
				switch r := rng.IntN(30); {
				case r < 10:
					clock.Advance(time.Duration(rng.Int64N(l.Period.Microseconds()/10)) * time.Microsecond)
				case r == 10 && !d.cluster:
					// Not on Cluster: there AllowAll refunds what one group
					// consumed when another denied, and a token bucket's
					// refund cannot bring back a TAT from before the
					// decision's time (the bucket kept max(TAT, now)); a
					// clock that then goes back before it finds the bucket
					// stricter than the memory store's.
					clock.Advance(-time.Duration(rng.Int64N(l.Period.Microseconds()/2)) * time.Microsecond)
					clock.resync()
					back++
				}
				switch rng.IntN(4) {
				case 0:
					skew = 0
				case 1:
					skew = time.Duration(rng.Int64N(3)-1) * time.Microsecond
				case 2:
					skew = time.Duration(rng.Int64N(4_000_000)-2_000_000) * time.Microsecond
				default:
					skew = time.Duration(rng.Int64N(2*3600_000_000)-3600_000_000) * time.Microsecond
				}
				cost := int64(1 + rng.IntN(2))
				switch rng.IntN(20) {
				case 0:
					cost = l.Max() + 1 + rng.Int64N(2)
				case 1:
					cost = l.Max()
				case 2:
					cost = 1 + rng.Int64N(l.Max())
				}
				switch r := rng.IntN(20); {
				case r == 0:
					e1, e2 := mem.Reset(ctx, key, l), rs.Reset(ctx, key, l)
					if e1 != nil || e2 != nil {
						fatalf("op %d (seed %d): reset: %v, %v", i, seed, e1, e2)
					}
				case r < 4:
					other := limits[rng.IntN(len(limits))]
					reqs := []redlimit.Request{{Key: key, Limit: l, Cost: cost}, {Key: keys[rng.IntN(len(keys))] + "x", Limit: other, Cost: 1}}
					d1, e1 := mem.AllowAll(ctx, reqs)
					d2, e2 := rs.AllowAll(ctx, reqs)
					if e1 != nil || e2 != nil {
						fatalf("op %d (seed %d): AllowAll: %v, %v", i, seed, e1, e2)
					}
					history = append(history, fmt.Sprintf("%d at %s: AllowAll %q %s cost %d + %q %s: %+v", i, clock.Now().Sub(start), key, l, cost, reqs[1].Key, other, d1))
					if d1.Allowed != d2.Allowed || d1.Results[0] != d2.Results[0] || d1.Results[1] != d2.Results[1] {
						fatalf("op %d (seed %d): AllowAll %+v at %s:\nmemory %+v\nredis  %+v", i, seed, reqs, clock.Now().Sub(redlimittest.T0), d1, d2)
					}
				default:
					f1, f2 := mem.AllowN, rs.AllowN
					if r < 7 {
						f1, f2 = mem.Peek, rs.Peek
					}
					r1, e1 := f1(ctx, key, l, cost)
					r2, e2 := f2(ctx, key, l, cost)
					if e1 != nil || e2 != nil {
						fatalf("op %d (seed %d): %v, %v", i, seed, e1, e2)
					}
					history = append(history, fmt.Sprintf("%d at %s: %q %s cost %d peek=%v: %+v", i, clock.Now().Sub(start), key, l, cost, r < 7, r1))
					if r1 != r2 {
						fatalf("op %d (seed %d): %q %s cost %d at %s:\nmemory %+v\nredis  %+v", i, seed, key, l, cost, clock.Now().Sub(redlimittest.T0), r1, r2)
					}
					if r1.Allowed {
						allowed++
					} else {
						denied++
					}
				}
			}
			// Both answers must have been compared many times.
			if allowed < 300 || denied < 300 || back < 50 && !d.cluster {
				t.Errorf("seed %d: only %d allowed and %d denied single decisions, %d steps back", seed, allowed, denied, back)
			}
			t.Logf("seed %d: %d allowed, %d denied single decisions compared, %d steps back", seed, allowed, denied, back)
		})
	}
}
