package dashboard

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// The top limited keys are counted with the Space-Saving algorithm
// (Metwally, Agrawal and El Abbadi, 2005): a summary keeps k counters; a
// key that has one adds to it; a new key takes over the smallest counter,
// inheriting its count as its possible overestimate. Any key seen more than
// n/k times in n events is in the summary, and no count is below the key's
// true count nor above it by more than the inherited error. Memory is k
// counters whatever the number of distinct keys.
//
// To follow recent traffic, each shard keeps two generations, each one
// window long: the current summary and the previous one. A snapshot merges
// both, so it covers the last one to two windows.

// item is a counted key: its series (the domain and rule) and its value.
type item struct {
	s   *series
	key string
}

// counter is one Space-Saving counter.
type counter struct {
	item  item
	count uint64
	err   uint64 // how much of count may belong to keys evicted before
}

// summary is a Space-Saving summary: a min-heap of at most k counters by
// count, and where each item sits in it.
type summary struct {
	heap  []counter
	index map[item]int
}

func newSummary(k int) summary {
	return summary{heap: make([]counter, 0, k), index: make(map[item]int, k)}
}

func (s *summary) reset() {
	s.heap = s.heap[:0]
	clear(s.index)
}

// add counts one event of it.
func (s *summary) add(it item) {
	if i, ok := s.index[it]; ok {
		s.heap[i].count++
		s.down(i)
		return
	}
	it.key = strings.Clone(it.key) // do not keep the caller's buffer alive
	if len(s.heap) < cap(s.heap) {
		s.heap = append(s.heap, counter{item: it, count: 1})
		s.index[it] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	// Take over the smallest counter.
	c := &s.heap[0]
	delete(s.index, c.item)
	*c = counter{item: it, count: c.count + 1, err: c.count}
	s.index[it] = 0
	s.down(0)
}

func (s *summary) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.index[s.heap[i].item] = i
	s.index[s.heap[j].item] = j
}

func (s *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].count <= s.heap[i].count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *summary) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.heap[r].count < s.heap[l].count {
			m = r
		}
		if s.heap[i].count <= s.heap[m].count {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// topShard is one shard of the top keys, with its own lock: each event
// goes to a random shard, so concurrent denials seldom wait for each other.
type topShard struct {
	mu        sync.Mutex
	start     int64 // when cur began, Unix ns
	cur, prev summary
	_         [64]byte // keep shards' locks on separate cache lines
}

// topKeys tracks the most limited keys over the last one to two windows.
type topKeys struct {
	window int64 // a generation's length, ns
	shards []topShard
}

func newTopKeys(k, shards int, window, now int64) *topKeys {
	t := &topKeys{window: window, shards: make([]topShard, shards)}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.start = now
		sh.cur, sh.prev = newSummary(k), newSummary(k)
	}
	return t
}

// rotate starts a new generation if the current one is a window old.
// Called with sh.mu held.
func (t *topKeys) rotate(sh *topShard, now int64) {
	age := now - sh.start
	if age < t.window {
		return
	}
	if age >= 2*t.window {
		sh.prev.reset() // nothing from the last two windows
	} else {
		sh.prev, sh.cur = sh.cur, sh.prev
	}
	sh.cur.reset()
	sh.start = now
}

func (t *topKeys) add(shard int, it item, now int64) {
	sh := &t.shards[shard]
	sh.mu.Lock()
	t.rotate(sh, now)
	sh.cur.add(it)
	sh.mu.Unlock()
}

// size returns how many counters are in use, for tests.
func (t *topKeys) size() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.cur.heap) + len(sh.prev.heap)
		sh.mu.Unlock()
	}
	return n
}

// top merges every shard's generations and returns the n keys with the
// highest counts, highest first.
func (t *topKeys) top(n int, now int64) []TopKey {
	merged := map[item]*TopKey{}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		t.rotate(sh, now)
		for _, sum := range []*summary{&sh.cur, &sh.prev} {
			for _, c := range sum.heap {
				k := merged[c.item]
				if k == nil {
					k = &TopKey{Domain: c.item.s.domain, Rule: c.item.s.rule, Key: c.item.key}
					merged[c.item] = k
				}
				k.Count += c.count
				k.Error += c.err
			}
		}
		sh.mu.Unlock()
	}
	out := make([]TopKey, 0, len(merged))
	for _, k := range merged {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b TopKey) int {
		return cmp.Or(
			cmp.Compare(b.Count, a.Count),
			cmp.Compare(a.Domain, b.Domain),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Key, b.Key))
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
