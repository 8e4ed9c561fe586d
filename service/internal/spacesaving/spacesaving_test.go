package spacesaving

import (
	"math/rand/v2"
	"testing"
)

// A table keeps what the algorithm promises, checked against exact counts
// over random streams: with room for every key it counts exactly; past
// that, every key counted more than the least count is in the table, each
// entry's count is at least its true count and count minus error at most
// it, and the counts add up to the stream's length.
func TestTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		max      int
		distinct int  // keys drawn uniformly, or...
		skewed   bool // ...10 heavy keys among unique ones
	}{
		{"room for all", 100, 10, false},
		{"exactly full", 100, 100, false},
		{"uniform, overfull", 100, 1000, false},
		{"skewed", 50, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, 2))
			tb := New[uint64](tc.max)
			exact := map[uint64]float64{}
			const n = 20_000
			for i := range n {
				k := uint64(rng.IntN(max(tc.distinct, 10)))
				if tc.skewed && rng.IntN(2) == 0 {
					k = 1000 + uint64(i)
				}
				exact[k]++
				got := tb.Add(k)
				e := tb.at[k]
				if got != e.count-e.err {
					t.Fatalf("Add returned %v, entry %+v", got, e)
				}
				if i%997 == 0 {
					checkHeap(t, tb)
				}
			}
			checkHeap(t, tb)
			least, total := tb.heap[0].count, 0.0
			for k, n := range exact {
				e, ok := tb.at[k]
				if !ok {
					if n > least {
						t.Errorf("key %d counted %v times, above the least %v, is not in the table", k, n, least)
					}
					continue
				}
				total += e.count
				if e.count-e.err > n || e.count < n {
					t.Errorf("key %d counted %v times: entry %+v", k, n, e)
				}
				if len(exact) <= tc.max && (e.count != n || e.err != 0) {
					t.Errorf("key %d counted %v times in a table with room: entry %+v", k, n, e)
				}
			}
			if total != n {
				t.Errorf("counts add to %v, want %d", total, n)
			}
			if tc.skewed {
				for k := range uint64(10) { // above 1/max of the stream: kept
					if !tb.Has(k) {
						t.Errorf("heavy key %d is not in the table", k)
					}
				}
			}
			if tb.Len() != min(len(exact), tc.max) {
				t.Errorf("%d entries, want %d", tb.Len(), min(len(exact), tc.max))
			}
		})
	}
}

// Halve, Remove, Put and Reset keep the heap and its index, and the bound.
func TestTableUpdates(t *testing.T) {
	t.Parallel()
	tb := New[uint64](50)
	for i := range 5000 {
		tb.Add(uint64(i % 70))
	}
	tb.Halve()
	checkHeap(t, tb)
	tb.Remove(5)
	tb.Remove(tb.heap[0].key)
	tb.Remove(1 << 40) // absent
	tb.Put(7, 1e9)
	tb.Put(99_999_999, 1e9)
	checkHeap(t, tb)
	if tb.Len() > tb.max {
		t.Errorf("%d entries, above %d", tb.Len(), tb.max)
	}
	if tb.Has(5) || !tb.Has(99_999_999) || tb.at[7].count != 1e9 || tb.at[7].err != 0 {
		t.Errorf("after the updates: has 5 %v, has 99999999 %v, 7 is %+v", tb.Has(5), tb.Has(99_999_999), tb.at[7])
	}
	n := 0
	tb.Each(func(uint64, float64, float64) { n++ })
	if n != tb.Len() {
		t.Errorf("Each saw %d entries of %d", n, tb.Len())
	}
	tb.Reset()
	if tb.Len() != 0 || tb.Has(7) {
		t.Errorf("after Reset: %d entries", tb.Len())
	}
	tb.Add(3)
	checkHeap(t, tb)
	var zero Table[string]
	if zero.Add("x") != 1 || zero.Len() != 0 {
		t.Error("the zero table kept a key")
	}
}

// checkHeap checks the heap's order and its index.
func checkHeap(t *testing.T, tb *Table[uint64]) {
	t.Helper()
	if len(tb.at) != len(tb.heap) {
		t.Fatalf("%d indexed, %d in the heap", len(tb.at), len(tb.heap))
	}
	for i, e := range tb.heap {
		if tb.at[e.key] != e || e.i != i {
			t.Fatalf("entry %d (%+v) indexed as %+v", i, e, tb.at[e.key])
		}
		if i > 0 && tb.less(i, (i-1)/2) {
			t.Fatalf("entry %d is less than its parent", i)
		}
	}
}
