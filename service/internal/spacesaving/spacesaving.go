// Package spacesaving counts the most frequent keys of a stream in bounded
// memory, by the Space-Saving algorithm (Metwally, Agrawal and El Abbadi,
// 2005).
//
// A [Table] keeps at most max entries. A key not in it takes the entry of
// the least count, oldest first among equals. It starts from that count
// plus one; the count inherited is its error. Any key counted more than
// the least count in the table is in it. An entry's count is at least the
// key's true count, and count minus error at most it.
package spacesaving

// Table counts keys in at most max entries. Counts are float64 so that
// they can be halved (decay). The zero value keeps nothing. It is not safe
// for concurrent use.
type Table[K comparable] struct {
	max  int
	heap []*entry[K]     // a min-heap by (count, seq)
	at   map[K]*entry[K] // by key
	seq  uint64          // the last entry's age
}

// entry is one counted key. Entries are pointers that know their place in
// the heap, so moving one writes no map entry.
type entry[K comparable] struct {
	key        K
	count, err float64
	seq        uint64 // order of arrival: the oldest of equal counts goes first
	i          int    // index in heap
}

// New returns a table of at most max entries.
func New[K comparable](max int) *Table[K] {
	return &Table[K]{max: max, at: make(map[K]*entry[K])}
}

// Len returns the number of entries.
func (t *Table[K]) Len() int { return len(t.heap) }

// Has reports whether k has an entry.
func (t *Table[K]) Has(k K) bool {
	_, ok := t.at[k]
	return ok
}

// Add counts k once and returns what it is guaranteed to have counted
// (count minus error).
func (t *Table[K]) Add(k K) float64 {
	if e, ok := t.at[k]; ok {
		e.count++
		t.down(e.i)
		return e.count - e.err
	}
	if t.max <= 0 {
		return 1
	}
	if len(t.heap) < t.max {
		t.push(&entry[K]{key: k, count: 1})
		return 1
	}
	t.replaceLeast(k, t.heap[0].count+1, t.heap[0].count)
	return 1
}

// Put counts k as count with no error. A full table gives it the least
// entry only if count is above that entry's.
func (t *Table[K]) Put(k K, count float64) {
	if t.max <= 0 {
		return
	}
	if e, ok := t.at[k]; ok {
		e.count, e.err = count, 0
		t.down(t.up(e.i))
		return
	}
	if len(t.heap) < t.max {
		t.push(&entry[K]{key: k, count: count})
		return
	}
	if count > t.heap[0].count {
		t.replaceLeast(k, count, 0)
	}
}

// Remove forgets k.
func (t *Table[K]) Remove(k K) {
	e, ok := t.at[k]
	if !ok {
		return
	}
	delete(t.at, k)
	i, last := e.i, len(t.heap)-1
	if i != last {
		t.heap[i] = t.heap[last]
		t.heap[i].i = i
	}
	t.heap[last] = nil
	t.heap = t.heap[:last]
	if i != last {
		t.down(t.up(i))
	}
}

// Halve halves every count and error, which keeps the order.
func (t *Table[K]) Halve() {
	for _, e := range t.heap {
		e.count /= 2
		e.err /= 2
	}
}

// Reset forgets every key.
func (t *Table[K]) Reset() {
	clear(t.heap)
	t.heap = t.heap[:0]
	clear(t.at)
}

// Each calls f for every entry, in no particular order.
func (t *Table[K]) Each(f func(k K, count, err float64)) {
	for _, e := range t.heap {
		f(e.key, e.count, e.err)
	}
}

// replaceLeast gives the least entry to k.
func (t *Table[K]) replaceLeast(k K, count, err float64) {
	e := t.heap[0]
	delete(t.at, e.key)
	e.key, e.count, e.err, e.seq = k, count, err, t.next()
	t.at[k] = e
	t.down(0)
}

func (t *Table[K]) next() uint64 {
	t.seq++
	return t.seq
}

func (t *Table[K]) push(e *entry[K]) {
	if t.at == nil {
		t.at = make(map[K]*entry[K])
	}
	e.seq, e.i = t.next(), len(t.heap)
	t.heap = append(t.heap, e)
	t.at[e.key] = e
	t.up(e.i)
}

func (t *Table[K]) less(i, j int) bool {
	a, b := t.heap[i], t.heap[j]
	return a.count < b.count || a.count == b.count && a.seq < b.seq
}

func (t *Table[K]) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.heap[i].i, t.heap[j].i = i, j
}

// up moves entry i up to its place and returns where it ends.
func (t *Table[K]) up(i int) int {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			break
		}
		t.swap(i, p)
		i = p
	}
	return i
}

// down moves entry i down to its place.
func (t *Table[K]) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(t.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(t.heap) && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}
