package reserve

// pendingHeap holds the pending reservations, earliest deadline first, each
// knowing its index so that a settled one leaves in O(log n).
type pendingHeap []*Reservation

func (h pendingHeap) less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }

func (h pendingHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *pendingHeap) push(r *Reservation) {
	r.index = len(*h)
	*h = append(*h, r)
	h.up(r.index)
}

// remove takes r, which must be in h, out of it.
func (h *pendingHeap) remove(r *Reservation) {
	i, last := r.index, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	r.index = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h pendingHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h pendingHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}
