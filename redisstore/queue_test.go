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

// TestQueueDifferential applies random sequences of queues (with random
// maximum waits), unqueues of earlier turns, admissions, peeks and
// resets to the memory store and to Redis with explicit time: every
// answer must be the same.
func TestQueueDifferential(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(3, time.Second).TokenBucket(4),
		redlimit.Per(7, 100*time.Millisecond).TokenBucket(2),
		redlimit.Per(100, time.Second).TokenBucket(1),
		// The same state as the first, its limit changed under its turns.
		redlimit.Per(5, time.Second).TokenBucket(2),
		// The bounds: the most tokens, and the longest emission interval.
		redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount),
		redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(14),
	}
	keys := []string{"a", "{b}", "c:\n"}
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
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)), redisstore.WithTTLMargin(10*time.Minute))
			ctx := context.Background()
			var history []string
			fatalf := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d: %s\nlast operations:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-25):], "\n"))
			}
			type pair struct{ m, r redlimit.Turn }
			var held []pair
			var queued, back int
			for range 1500 {
				clock.keepUp()
				clock.wander(rng, 100*time.Millisecond)
				l := limits[rng.IntN(len(limits))]
				key := keys[rng.IntN(len(keys))]
				n := 1 + rng.Int64N(min(l.Burst+1, redlimit.MaxCost))
				switch op := rng.IntN(10); {
				case op < 5:
					var wait time.Duration
					switch rng.IntN(4) {
					case 0:
						wait = redlimit.MaxWait
					case 1:
					default:
						wait = time.Duration(rng.Int64N(int64(min(2*l.Period, redlimit.MaxWait))))
					}
					mr, merr := mem.Queue(ctx, key, l, n, wait)
					rr, rerr := rs.Queue(ctx, key, l, n, wait)
					history = append(history, fmt.Sprintf("%s queue %q %v n=%d wait=%s: %+v", clock.Now().Format(time.StampMicro), key, l, n, wait, mr))
					if (merr == nil) != (rerr == nil) || mr != rr {
						fatalf("queue: memory %+v, %v; redis %+v, %v", mr, merr, rr, rerr)
					}
					if mr.Allowed {
						queued++
						held = append(held, pair{mr, rr})
					}
				case op < 7 && len(held) > 0:
					// The latest turn half the time: it may give back.
					i := len(held) - 1
					if rng.IntN(2) == 0 {
						i = rng.IntN(len(held))
					}
					p := held[i]
					if rng.IntN(4) != 0 {
						// Else it may be given back twice.
						held = append(held[:i], held[i+1:]...)
					}
					mb, merr := mem.Unqueue(ctx, p.m)
					rb, rerr := rs.Unqueue(ctx, p.r)
					history = append(history, fmt.Sprintf("%s unqueue %+v: %v", clock.Now().Format(time.StampMicro), p.m, mb))
					if merr != nil || rerr != nil || mb != rb {
						fatalf("unqueue: memory %v, %v; redis %v, %v", mb, merr, rb, rerr)
					}
					if mb {
						back++
					}
				case op < 9:
					allow := op == 7
					f := mem.Peek
					g := rs.Peek
					if allow {
						f, g = mem.AllowN, rs.AllowN
					}
					mres, merr := f(ctx, key, l, n)
					rres, rerr := g(ctx, key, l, n)
					history = append(history, fmt.Sprintf("%s allow=%v %q %v n=%d: %+v", clock.Now().Format(time.StampMicro), allow, key, l, n, mres))
					if merr != nil || rerr != nil || mres != rres {
						fatalf("decide: memory %+v, %v; redis %+v, %v", mres, merr, rres, rerr)
					}
				default:
					history = append(history, fmt.Sprintf("%s reset %q %v", clock.Now().Format(time.StampMicro), key, l))
					if err := mem.Reset(ctx, key, l); err != nil {
						t.Fatal(err)
					}
					if err := rs.Reset(ctx, key, l); err != nil {
						t.Fatal(err)
					}
				}
			}
			if queued < 100 || back < 10 {
				t.Errorf("seed %d: only %d queued, %d given back: the sequence tests little", seed, queued, back)
			}
		})
	}
}
