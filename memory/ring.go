package memory

import "sort"

// ring is a sliding log: one entry per instant that admitted requests,
// whatever their cost, in order of time. It is a circular buffer that
// grows by doubling and is reused. So a busy key allocates nothing once
// its buffer has grown.
//
// Each entry holds its time and the units admitted before it on the key
// (cum). cum counts from any origin and wraps at 2^64. total counts the
// units through the newest entry. The units from entry i on are
// total - cum(i). The units of entry i are cum(i+1) - cum(i). Every query
// is a binary search. So a request costs O(log n) whatever its cost, and
// memory grows with the number of requests, not units.
type ring struct {
	buf   []logEntry
	head  int // index of the oldest entry
	n     int
	total uint64
}

type logEntry struct {
	at  int64  // µs; after the entry ahead of it
	cum uint64 // units admitted before this entry
}

func (r *ring) at(i int) *logEntry { return &r.buf[r.pos(i)] }

// pos returns the index in buf of position i (0 <= i < 2*len(buf) - head).
// It avoids the division of a modulo: at is called at every probe of a
// binary search.
func (r *ring) pos(i int) int {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return j
}

// cumAfter returns the units admitted through entry i.
func (r *ring) cumAfter(i int) uint64 {
	if i == r.n-1 {
		return r.total
	}
	return r.at(i + 1).cum
}

func (r *ring) clear() { r.head, r.n = 0, 0 }

// firstAfter returns the index of the first entry later than t.
func (r *ring) firstAfter(t int64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).at > t })
}

// live returns the index of the first entry later than since, and the units
// of the entries from it on. A nil ring is empty.
func (r *ring) live(since int64) (first int, units int64) {
	if r == nil {
		return 0, 0
	}
	first = r.firstAfter(since)
	if first == r.n {
		return first, 0
	}
	return first, int64(r.total - r.at(first).cum)
}

// unitAt returns the time of the k-th (1-based) unit counted from entry
// first, which must exist.
func (r *ring) unitAt(first int, k int64) int64 {
	base := r.at(first).cum
	i := first + sort.Search(r.n-first, func(j int) bool {
		return int64(r.cumAfter(first+j)-base) >= k
	})
	return r.at(i).at
}

// newest returns the time of the newest entry; the ring must not be empty.
func (r *ring) newest() int64 { return r.at(r.n - 1).at }

// trim drops the entries at or before t.
func (r *ring) trim(t int64) {
	k := r.firstAfter(t)
	if k == 0 {
		return
	}
	r.head = r.pos(k)
	r.n -= k
}

// add adds n units at time t, which must not be before the newest entry:
// to the newest entry if it is at t, else in a new one.
func (r *ring) add(t, n int64) {
	if r.n > 0 && r.newest() == t {
		r.total += uint64(n)
		return
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	*r.at(r.n) = logEntry{at: t, cum: r.total}
	r.n++
	r.total += uint64(n)
}

func (r *ring) grow() {
	buf := make([]logEntry, max(4, 2*len(r.buf)))
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// merge moves the units of the oldest entry into the next, at most twice.
// It does so while the entries after the oldest hold at least count
// units. The oldest entry then can never change a decision under count.
// While the later entries live the key is denied anyway, and its units
// expire before theirs. So only one entry per debit need be kept beyond
// the count's worth. Every entry must be live. With a fixed count, a log
// so merged after every debit holds at most count entries. Each holds a
// unit at least. After the count shrank, each debit merges one more entry
// than it adds.
func (r *ring) merge(count int64) {
	for range 2 {
		if r.n < 2 || int64(r.total-r.at(1).cum) < count {
			return
		}
		r.at(1).cum = r.at(0).cum
		r.head = r.pos(1)
		r.n--
	}
}
