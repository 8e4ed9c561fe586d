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

// TestDifferential applies long random sequences of (time, key, cost) to the
// memory store and to Redis with explicit time: every answer must be the same.
// Time never goes backwards (the stores need not agree when it does).
func TestDifferential(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(5, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(7, time.Second).SlidingLog(),
		redlimit.Per(10, time.Second).SlidingWindow(),
		redlimit.Per(3, 70*time.Millisecond).SlidingWindow(),
		redlimit.Per(3, time.Second).TokenBucket(4),
		redlimit.Per(7, 100*time.Millisecond).TokenBucket(2),
	}
	keys := []string{"a", "b", "{c}", "d:\n"}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 7))
			start := redlimittest.T0.Add(123456 * time.Microsecond)
			clock := newPacedClock(start)
			mem, err := memory.New(memory.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)))
			ctx := context.Background()
			var allowed, denied int
			var history []string // what was done, printed on a mismatch
			fatalf := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("%s\nlast operations:\n%s", fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-25):], "\n"))
			}
			for i := range 3000 {
				l := limits[rng.IntN(len(limits))]
				key := keys[rng.IntN(len(keys))]
				// Steps from 0 to a tenth of the period, in whole microseconds,
				// mostly 0 so that requests share an instant and limits fill.
				if rng.IntN(3) == 0 {
					clock.Advance(time.Duration(rng.Int64N(int64(l.Period/10)/1000)) * time.Microsecond)
				}
				clock.keepUp()
				cost := int64(1 + rng.IntN(2))
				if rng.IntN(20) == 0 {
					cost = l.Max() + 1
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
			// Both outcomes must have been compared many times.
			if allowed < 300 || denied < 300 {
				t.Errorf("seed %d: only %d allowed and %d denied single decisions", seed, allowed, denied)
			}
			t.Logf("seed %d: %d allowed, %d denied single decisions compared", seed, allowed, denied)
		})
	}
}
