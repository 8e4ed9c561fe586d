package memory

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRingMatchesASortedSlice runs random adds (times that mostly rise but
// also go back), trims and queries on a ring and on a plain sorted slice,
// through many wrap-arounds and growths, and compares every answer.
func TestRingMatchesASortedSlice(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		limit := int64(1 + rng.IntN(200))
		var r ring
		var model []int64
		now := int64(1000)
		for step := range 5000 {
			switch op := rng.IntN(10); {
			case op < 5: // add
				now += int64(rng.IntN(5))
				at := now
				if rng.IntN(10) == 0 {
					at -= int64(rng.IntN(50)) // a clock that went back
				}
				n := int64(1 + rng.IntN(3))
				if int64(len(model))+n > limit {
					continue
				}
				r.add(at, n, limit)
				for range n {
					i, _ := slices.BinarySearch(model, at+1)
					model = slices.Insert(model, i, at)
				}
			case op < 7: // trim
				cut := now - int64(rng.IntN(100))
				r.trim(cut)
				i, _ := slices.BinarySearch(model, cut+1)
				model = model[i:]
			case op == 7 && rng.IntN(50) == 0:
				r.clear()
				model = model[:0]
			}
			since := now - int64(rng.IntN(120))
			i, _ := slices.BinarySearch(model, since+1)
			if got, want := r.countAfter(since), int64(len(model)-i); got != want {
				t.Fatalf("seed %d step %d: countAfter(%d) = %d, want %d", seed, step, since, got, want)
			}
			if k := len(model) - i; k > 0 {
				j := 1 + rng.IntN(k)
				if got := r.nthAfter(since, int64(j)); got != model[i+j-1] {
					t.Fatalf("seed %d step %d: nthAfter(%d, %d) = %d, want %d", seed, step, since, j, got, model[i+j-1])
				}
			}
			if len(model) > 0 && r.newest() != model[len(model)-1] {
				t.Fatalf("seed %d step %d: newest %d, want %d", seed, step, r.newest(), model[len(model)-1])
			}
			if int64(len(r.buf)) > limit {
				t.Fatalf("seed %d step %d: buffer of %d beyond the limit %d", seed, step, len(r.buf), limit)
			}
		}
	}
}
