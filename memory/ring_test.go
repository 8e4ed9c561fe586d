package memory

import (
	"math/rand/v2"
	"testing"
)

// TestRingMatchesAUnitList runs random adds (costs from 1 to large, times
// that rise or stay), trims and queries on a ring and on a plain list of one
// time per unit, through many wrap-arounds and growths, and compares every
// answer.
func TestRingMatchesAUnitList(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var r ring
		// The cumulative count starts anywhere, and wraps at 2^64.
		r.total = rng.Uint64()
		var units []int64 // one time per unit, in order
		now := int64(1000)
		for step := range 5000 {
			switch op := rng.IntN(10); {
			case op < 5: // add
				now += int64(rng.IntN(3))
				n := int64(1 + rng.IntN(3))
				if rng.IntN(20) == 0 {
					n = int64(1 + rng.IntN(500))
				}
				r.add(now, n)
				for range n {
					units = append(units, now)
				}
			case op < 7: // trim
				cut := now - int64(rng.IntN(100))
				r.trim(cut)
				i := 0
				for i < len(units) && units[i] <= cut {
					i++
				}
				units = units[i:]
			case op == 7 && rng.IntN(50) == 0:
				r.clear()
				units = units[:0]
			}
			since := now - int64(rng.IntN(120))
			i := 0
			for i < len(units) && units[i] <= since {
				i++
			}
			first, got := r.live(since)
			if want := int64(len(units) - i); got != want {
				t.Fatalf("seed %d step %d: live(%d) = %d units, want %d", seed, step, since, got, want)
			}
			if k := len(units) - i; k > 0 {
				j := 1 + rng.IntN(k)
				if got := r.unitAt(first, int64(j)); got != units[i+j-1] {
					t.Fatalf("seed %d step %d: unit %d after %d at %d, want %d", seed, step, j, since, got, units[i+j-1])
				}
			}
			if r.n > 0 && r.newest() != units[len(units)-1] {
				t.Fatalf("seed %d step %d: newest %d, want %d", seed, step, r.newest(), units[len(units)-1])
			}
			distinct := 0
			for j := range units {
				if j == 0 || units[j] != units[j-1] {
					distinct++
				}
			}
			if r.n > distinct {
				t.Fatalf("seed %d step %d: %d entries for %d distinct times", seed, step, r.n, distinct)
			}
		}
	}
}

// TestRingCostsNothingPerUnit: one entry of the largest cost takes one
// slot, and its units are counted and found by time.
func TestRingCostsNothingPerUnit(t *testing.T) {
	var r ring
	r.add(10, 1)
	r.add(20, 1<<40)
	r.add(30, 2)
	if len(r.buf) > 4 || r.n != 3 {
		t.Fatalf("%d entries in a buffer of %d", r.n, len(r.buf))
	}
	first, units := r.live(10)
	if first != 1 || units != 1<<40+2 {
		t.Fatalf("live(10) = %d, %d", first, units)
	}
	for k, want := range map[int64]int64{1: 20, 1 << 40: 20, 1<<40 + 1: 30, 1<<40 + 2: 30} {
		if got := r.unitAt(first, k); got != want {
			t.Errorf("unit %d at %d, want %d", k, got, want)
		}
	}
}
