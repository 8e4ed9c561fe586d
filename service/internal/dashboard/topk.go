package dashboard

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/redlimit/redlimit/service/internal/spacesaving"
)

// The top limited keys are counted in Space-Saving tables of k entries
// (package spacesaving). Any key seen more than n/k times in n events is
// in its table. Memory is k entries whatever the number of distinct keys.
//
// To follow recent traffic, each shard keeps two generations, each one
// window long: the current summary and the previous one. A snapshot merges
// both, so it covers the last one to two windows.

// item is a counted key: its series (the domain and rule) and its value.
type item struct {
	s   *series
	key string
}

// topShard is one shard of the top keys, with its own lock: each event
// goes to a random shard, so concurrent denials seldom wait for each other.
type topShard struct {
	mu        sync.Mutex
	start     int64 // when cur began, Unix ns
	cur, prev *spacesaving.Table[item]
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
		sh.cur, sh.prev = spacesaving.New[item](k), spacesaving.New[item](k)
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
		sh.prev.Reset() // nothing from the last two windows
	} else {
		sh.prev, sh.cur = sh.cur, sh.prev
	}
	sh.cur.Reset()
	sh.start = now
}

func (t *topKeys) add(shard int, it item, now int64) {
	sh := &t.shards[shard]
	sh.mu.Lock()
	t.rotate(sh, now)
	if !sh.cur.Has(it) {
		it.key = strings.Clone(it.key) // do not keep the caller's buffer alive
	}
	sh.cur.Add(it)
	sh.mu.Unlock()
}

// size returns how many counters are in use, for tests.
func (t *topKeys) size() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.cur.Len() + sh.prev.Len()
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
		for _, sum := range []*spacesaving.Table[item]{sh.cur, sh.prev} {
			sum.Each(func(it item, count, err float64) {
				k := merged[it]
				if k == nil {
					k = &TopKey{Domain: it.s.domain, Rule: it.s.rule, Key: it.key}
					merged[it] = k
				}
				k.Count += uint64(count)
				k.Error += uint64(err)
			})
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
