package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// TestBoundsUnderConcurrency drives every operation of the store (AllowN,
// AllowAll of 1 to 8 limits, Peek, Reset, Sweep) from 32 goroutines at its
// bound in states, and at its bound in bytes (long keys, growing sliding
// logs), with the sweeper off and sweeping every millisecond. Limits of a
// few milliseconds go idle while the test runs (and are evicted); limits of
// an hour do not (and fill part of the store; the rest refuses new keys
// when it holds no idle state).
// It fails, rather than hangs, if no call finishes for stallTimeout, and
// checks throughout that the store never holds more than its bounds (a
// decision claims room before it commits: there is no overshoot), that
// exhausted keys are never allowed, and at the end that the store's counts
// match what it holds, and that no empty slot is left.
func TestBoundsUnderConcurrency(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxKeys  int
		maxBytes int64
		keyLen   int // longest key
	}{
		{"keys", 300, memory.DefaultMaxBytes, 16},
		{"bytes", memory.DefaultMaxKeys, 256 << 10, 2048},
	} {
		for _, sweep := range []time.Duration{0, time.Millisecond} {
			t.Run(fmt.Sprintf("%s/sweep=%s", c.name, sweep), func(t *testing.T) {
				s := newStoreNoCleanup(t, memory.WithSweepInterval(sweep), memory.WithMaxKeys(c.maxKeys), memory.WithMaxBytes(c.maxBytes))
				boundsUnderConcurrency(t, s, int64(c.maxKeys), c.maxBytes, c.keyLen)
			})
		}
	}
}

func boundsUnderConcurrency(t *testing.T, s *memory.Store, maxStates, maxBytes int64, keyLen int) {
	ctx := context.Background()
	limits := []redlimit.Limit{
		redlimit.Per(5, 2*time.Millisecond).FixedWindow(),
		redlimit.Per(5, 2*time.Millisecond).SlidingWindow(),
		redlimit.Per(20, 3*time.Millisecond).SlidingLog(),
		redlimit.PerSecond(1000).TokenBucket(3),
		redlimit.PerHour(3).FixedWindow(),
		redlimit.Per(5, 5*time.Millisecond).SlidingWindow(),
		redlimit.PerHour(500).SlidingLog(), // grows its buffer
		redlimit.Per(3, 4*time.Millisecond).TokenBucket(3),
	}
	keys := make([]string, 1500)
	for i := range keys {
		k := fmt.Sprint("k", i, ":")
		keys[i] = k + strings.Repeat("x", rand.IntN(keyLen-len(k)+1))
	}
	// Exhausted before the workers start; never allowed while they run.
	spent := redlimit.PerHour(2).SlidingLog()
	exhausted := []string{"spent:0", "spent:1", "spent:2", "spent:3"}
	for _, k := range exhausted {
		for range 2 {
			if r, err := s.AllowN(ctx, k, spent, 1); err != nil || !r.Allowed {
				t.Fatalf("%s: %+v, %v", k, r, err)
			}
		}
	}
	checkBounds := func(when string) {
		if st := s.Stats(); st.States > maxStates || st.Bytes > maxBytes {
			t.Errorf("%s: %+v beyond the bounds (%d states, %d bytes)", when, st, maxStates, maxBytes)
		}
	}

	calls := runWorkers(t, 32, 400, func(g, i int) {
		rng := rand.New(rand.NewPCG(uint64(g), uint64(i)))
		key := func() string { return keys[rng.IntN(len(keys))] }
		// The hour-long limits take 60 keys: they fill part of the store,
		// so that short-lived states are made and evicted in the rest.
		keyFor := func(l redlimit.Limit) string {
			if l.Period >= time.Hour {
				return keys[rng.IntN(60)]
			}
			return key()
		}
		switch op := rng.IntN(100); {
		case op < 40:
			l := limits[rng.IntN(len(limits))]
			k := keyFor(l)
			if rng.IntN(20) == 0 {
				k, l = exhausted[rng.IntN(len(exhausted))], spent
			}
			r, err := s.AllowN(ctx, k, l, 1+rng.Int64N(3))
			if err != nil {
				t.Error(err)
			} else if r.Allowed && l == spent {
				t.Errorf("%s allowed: %+v", k, r)
			}
		case op < 75:
			reqs := make([]redlimit.Request, 1+rng.IntN(8))
			for j, l := range rng.Perm(len(limits))[:len(reqs)] {
				// Distinct (key, algorithm, period): each limit once.
				reqs[j] = redlimit.Request{Key: keyFor(limits[l]), Limit: limits[l], Cost: 1 + rng.Int64N(2)}
			}
			withSpent := rng.IntN(10) == 0
			if withSpent {
				reqs[0] = redlimit.Request{Key: exhausted[rng.IntN(len(exhausted))], Limit: spent, Cost: 1}
			}
			d, err := s.AllowAll(ctx, reqs)
			if err != nil {
				t.Error(err)
				return
			}
			if withSpent && (d.Allowed || d.Results[0].Allowed) {
				t.Errorf("an exhausted key allowed: %+v", d)
			}
			for _, r := range d.Results {
				if d.Allowed && !r.Allowed {
					t.Errorf("allowed with a denial: %+v", d)
				}
			}
		case op < 90:
			if _, err := s.Peek(ctx, key(), limits[rng.IntN(len(limits))], 1); err != nil {
				t.Error(err)
			}
		case op < 99:
			if err := s.Reset(ctx, key(), limits[rng.IntN(len(limits))]); err != nil {
				t.Error(err)
			}
		default:
			s.Sweep()
		}
		if i%16 == 0 {
			checkBounds(fmt.Sprintf("goroutine %d, call %d", g, i))
		}
	})
	for _, k := range exhausted {
		if r, err := s.Peek(ctx, k, spent, 1); err != nil || r.Allowed {
			t.Errorf("%s at the end: %+v, %v", k, r, err)
		}
	}
	s.Close()
	checkBounds("at the end")
	states, bytes, empty, slots, sampled := s.Audit()
	st := s.Stats()
	t.Logf("%d calls; %+v", calls, st)
	if states != st.States || bytes != st.Bytes {
		t.Errorf("the store holds %d states and %d bytes, counts %+v", states, bytes, st)
	}
	if empty != 0 || slots != sampled {
		t.Errorf("%d empty slots, %d slots in the map, %d in the sampler", empty, slots, sampled)
	}
}
