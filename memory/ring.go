package memory

import "sort"

// ring holds a sliding log's timestamps (µs) in ascending order, in a
// circular buffer that grows by doubling and is reused, so a busy key
// allocates nothing once its buffer has grown.
type ring struct {
	buf  []int64
	head int // index of the oldest entry
	n    int
}

func (r *ring) at(i int) int64 { return r.buf[r.pos(i)] }

// pos returns the index in buf of position i (0 <= i < 2*len(buf) - head),
// without the division of a modulo: at is called at every probe of a
// binary search.
func (r *ring) pos(i int) int {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return j
}

func (r *ring) clear() { r.head, r.n = 0, 0 }

// firstAfter returns the index of the first entry greater than t.
func (r *ring) firstAfter(t int64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i) > t })
}

// countAfter returns how many entries are greater than t. A nil ring is empty.
func (r *ring) countAfter(t int64) int64 {
	if r == nil {
		return 0
	}
	return int64(r.n - r.firstAfter(t))
}

// nthAfter returns the k-th (1-based) entry greater than t; there must be one.
func (r *ring) nthAfter(t int64, k int64) int64 {
	return r.at(r.firstAfter(t) + int(k) - 1)
}

// newest returns the largest entry; the ring must not be empty.
func (r *ring) newest() int64 { return r.at(r.n - 1) }

// trim drops the entries at or before t.
func (r *ring) trim(t int64) {
	k := r.firstAfter(t)
	if k == 0 {
		return
	}
	r.head = r.pos(k)
	r.n -= k
}

// add inserts n copies of t, keeping the order. limit caps how far the buffer
// grows; the caller guarantees the ring never holds more than limit entries.
func (r *ring) add(t int64, n, limit int64) {
	need := r.n + int(n)
	if need > len(r.buf) {
		r.grow(need, int(limit))
	}
	if r.n == 0 || t >= r.newest() {
		for range n {
			r.buf[r.pos(r.n)] = t
			r.n++
		}
		return
	}
	// A time before the newest entry (an explicit clock that went back):
	// shift the later entries up by n.
	pos := r.firstAfter(t)
	for i := r.n - 1; i >= pos; i-- {
		r.buf[r.pos(i+int(n))] = r.at(i)
	}
	for i := range int(n) {
		r.buf[r.pos(pos+i)] = t
	}
	r.n += int(n)
}

func (r *ring) grow(need, limit int) {
	size := max(8, 2*len(r.buf))
	for size < need {
		size *= 2
	}
	size = max(min(size, limit), need)
	buf := make([]int64, size)
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}
