package rls

import (
	"math/rand/v2"
	"testing"
)

// The Space-Saving table keeps what the algorithm promises, checked against
// exact counts over a skewed random stream: every hash counted more than
// the least count of the table is in it, and each entry's count minus its
// error is at most its true count, its count at least. Halving keeps the
// heap's order.
func TestCandidates(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	c := candidates{max: 50}
	exact := map[uint64]float64{}
	for i := range 20_000 {
		h := uint64(rng.IntN(10)) // 10 heavy hashes, each 1/20 of the stream...
		if rng.IntN(2) == 0 {
			h = 1000 + uint64(i) // ...among unique ones
		}
		exact[h]++
		got := c.add(h)
		e := c.at[h]
		if got != e.count-e.err {
			t.Fatalf("add returned %v, entry %+v", got, e)
		}
		if i%997 == 0 {
			checkHeap(t, &c)
		}
	}
	checkHeap(t, &c)
	least := c.heap[0].count
	for h, n := range exact {
		e, ok := c.at[h]
		if !ok {
			if n > least {
				t.Errorf("hash %d counted %v times, above the least %v, is not in the table", h, n, least)
			}
			continue
		}
		if e.count-e.err > n || e.count < n {
			t.Errorf("hash %d counted %v times: entry %+v", h, n, e)
		}
	}
	for h := range uint64(10) { // above 1/max of the stream: kept
		if _, ok := c.at[h]; !ok {
			t.Errorf("heavy hash %d is not in the table", h)
		}
	}
	c.halve()
	checkHeap(t, &c)
	c.remove(5)
	c.remove(c.heap[0].h)
	c.put(7, 1e9)
	c.put(99_999_999, 1e9)
	checkHeap(t, &c)
	if len(c.heap) > c.max {
		t.Errorf("%d entries, above %d", len(c.heap), c.max)
	}
}

// checkHeap checks the heap's order and its index.
func checkHeap(t *testing.T, c *candidates) {
	t.Helper()
	if len(c.at) != len(c.heap) {
		t.Fatalf("%d indexed, %d in the heap", len(c.at), len(c.heap))
	}
	for i, e := range c.heap {
		if c.at[e.h] != e || e.i != i {
			t.Fatalf("entry %d (%+v) indexed as %+v", i, e, c.at[e.h])
		}
		if i > 0 && c.less(i, (i-1)/2) {
			t.Fatalf("entry %d is less than its parent", i)
		}
	}
}
