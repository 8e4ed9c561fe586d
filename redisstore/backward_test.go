package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestClockGoesBack decides requests whose times often step back, mostly by
// up to a quarter period, sometimes by one and a half, on both stores: they must agree on every answer,
// and the rules for a clock that went back (see the package documentation)
// must never admit more than the limit. The fixed window is counted in the
// key's latest window, the sliding log stamped at its newest entry's time:
// the test checks each window's count and every period of stamps.
func TestClockGoesBack(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(5, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(5, 100*time.Millisecond).SlidingLog(),
		redlimit.Per(5, 100*time.Millisecond).SlidingWindow(),
		redlimit.Per(50, time.Second).TokenBucket(5),
		redlimit.Per(3, time.Second).TokenBucket(2),
	}
	for _, d := range standalone {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			w := newTwin(t, d, today)
			w.loose = true
			rng := rand.New(rand.NewPCG(11, 12))
			for li, l := range limits {
				W := l.Period.Microseconds()
				key := fmt.Sprint(li)
				perWindow := map[int64]int64{} // fixed window: admitted per window counted in
				var stamps []int64             // sliding log: one per admitted unit
				var latest, newest int64       // the key's latest window, newest stamp
				back, allowed := 0, 0
				for range 800 {
					step := rng.Int64N(W / 3)
					switch rng.IntN(40) {
					case 0:
						step = -rng.Int64N(3 * W / 2)
						back++
					case 1, 2, 3, 4, 5:
						step = -rng.Int64N(W / 4)
						back++
					}
					w.clock.Advance(time.Duration(step) * time.Microsecond)
					now := w.clock.Now().UnixMicro()
					cost := int64(1 + rng.IntN(2))
					if rng.IntN(30) == 0 {
						cost = l.Max() + 1
					}
					peek := rng.IntN(5) == 0
					r := w.allow(key, l, cost, peek)
					if !r.Allowed || peek {
						continue
					}
					allowed++
					switch l.Algorithm {
					case redlimit.FixedWindow:
						latest = max(latest, now/W)
						perWindow[latest] += cost
						if perWindow[latest] > l.Count {
							w.fatalf("window %d counts %d, above %d", latest, perWindow[latest], l.Count)
						}
					case redlimit.SlidingLog:
						newest = max(newest, now)
						for range cost {
							stamps = append(stamps, newest)
						}
					}
				}
				if !sort.SliceIsSorted(stamps, func(i, j int) bool { return stamps[i] < stamps[j] }) {
					t.Fatalf("%s: stamps out of order", l)
				}
				for i := range stamps {
					// Units stamped in (stamps[i] - W, stamps[i]].
					lo := sort.Search(len(stamps), func(j int) bool { return stamps[j] > stamps[i]-W })
					hi := sort.Search(len(stamps), func(j int) bool { return stamps[j] > stamps[i] })
					if hi-lo > int(l.Count) {
						t.Fatalf("%s: %d units stamped in one period", l, hi-lo)
					}
				}
				if back < 80 || allowed < 150 {
					t.Errorf("%s: only %d steps back and %d allowed", l, back, allowed)
				}
			}
		})
	}
}
