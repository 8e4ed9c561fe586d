package rls

// candidates counts the hashes of labels in at most max entries, by the
// Space-Saving algorithm (Metwally, Agrawal and El Abbadi, 2005): a hash
// not counted takes the entry of the least count, oldest first among
// equals, and starts from that count plus one, the count inherited being
// its error. Any hash counted more than the least count in the table is
// in it, and count - error is at most what it was really counted. Counts
// are float64 so that they can be halved (decay). It is not safe for
// concurrent use.
type candidates struct {
	max  int
	heap []*candidate          // a min-heap by (count, seq)
	at   map[uint64]*candidate // by hash
	seq  uint64                // the last entry's age
}

// candidate is one entry. Entries are pointers, each knowing its place in
// the heap, so that moving one in the heap writes no map entry; the least
// one's is reused for the hash that takes its place.
type candidate struct {
	h          uint64
	count, err float64
	seq        uint64 // order of arrival: the oldest of equal counts goes first
	i          int    // index in heap
}

// add counts h once and returns what it is guaranteed to have counted
// (count - error).
func (c *candidates) add(h uint64) float64 {
	if e, ok := c.at[h]; ok {
		e.count++
		c.down(e.i)
		return e.count - e.err
	}
	if c.max <= 0 {
		return 1
	}
	if len(c.heap) < c.max {
		c.push(&candidate{h: h, count: 1})
		return 1
	}
	c.replaceLeast(h, c.heap[0].count+1, c.heap[0].count)
	return 1
}

// put counts h as count with no error (a label that lost its slot), taking
// the least entry if the table is full and count is above it.
func (c *candidates) put(h uint64, count float64) {
	if c.max <= 0 {
		return
	}
	if e, ok := c.at[h]; ok {
		e.count, e.err = count, 0
		c.down(c.up(e.i))
		return
	}
	if len(c.heap) < c.max {
		c.push(&candidate{h: h, count: count})
		return
	}
	if count > c.heap[0].count {
		c.replaceLeast(h, count, 0)
	}
}

// replaceLeast gives the least entry to h.
func (c *candidates) replaceLeast(h uint64, count, err float64) {
	e := c.heap[0]
	delete(c.at, e.h)
	e.h, e.count, e.err, e.seq = h, count, err, c.next()
	c.at[h] = e
	c.down(0)
}

// remove forgets h.
func (c *candidates) remove(h uint64) {
	e, ok := c.at[h]
	if !ok {
		return
	}
	delete(c.at, h)
	i, last := e.i, len(c.heap)-1
	if i != last {
		c.heap[i] = c.heap[last]
		c.heap[i].i = i
	}
	c.heap[last] = nil
	c.heap = c.heap[:last]
	if i != last {
		c.down(c.up(i))
	}
}

// halve halves every count and error, which keeps the heap's order.
func (c *candidates) halve() {
	for _, e := range c.heap {
		e.count /= 2
		e.err /= 2
	}
}

func (c *candidates) next() uint64 {
	c.seq++
	return c.seq
}

func (c *candidates) push(e *candidate) {
	if c.at == nil {
		c.at = make(map[uint64]*candidate)
	}
	e.seq, e.i = c.next(), len(c.heap)
	c.heap = append(c.heap, e)
	c.at[e.h] = e
	c.up(e.i)
}

func (c *candidates) less(i, j int) bool {
	a, b := c.heap[i], c.heap[j]
	return a.count < b.count || a.count == b.count && a.seq < b.seq
}

func (c *candidates) swap(i, j int) {
	c.heap[i], c.heap[j] = c.heap[j], c.heap[i]
	c.heap[i].i, c.heap[j].i = i, j
}

// up moves entry i up to its place and returns where it ends.
func (c *candidates) up(i int) int {
	for i > 0 {
		p := (i - 1) / 2
		if !c.less(i, p) {
			break
		}
		c.swap(i, p)
		i = p
	}
	return i
}

// down moves entry i down to its place.
func (c *candidates) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(c.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(c.heap) && c.less(r, l) {
			m = r
		}
		if !c.less(m, i) {
			return
		}
		c.swap(i, m)
		i = m
	}
}
