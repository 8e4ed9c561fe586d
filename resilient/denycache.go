package resilient

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

const denyShards = 16

// denyCache remembers denials the store answered with nothing remaining, until
// their retry-after, so that further requests of the same key and limit are
// denied without asking the store. It never denies what the store would
// allow: consumption by others only delays the moment a request can pass,
// and a request of a smaller cost than the one denied is not answered from
// the cache.
type denyCache struct {
	seed   maphash.Seed
	max    int // per shard
	shards [denyShards]struct {
		mu sync.Mutex
		m  map[denyKey]denial
	}
}

type denyKey struct {
	key   string
	limit redlimit.Limit
}

type denial struct {
	until time.Time // the earliest the store could allow cost
	reset time.Time
	cost  int64
}

func newDenyCache(size int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), max: max(1, (size+denyShards-1)/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[denyKey]denial)
	}
	return c
}

func (c *denyCache) shard(key string) int { return int(maphash.String(c.seed, key) % denyShards) }

// get returns the cached denial of a request of cost n at now, if any.
func (c *denyCache) get(key string, l redlimit.Limit, n int64, now time.Time) (redlimit.Result, bool) {
	sh := &c.shards[c.shard(key)]
	k := denyKey{key, l}
	sh.mu.Lock()
	d, ok := sh.m[k]
	if ok && !now.Before(d.until) {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || n < d.cost {
		return redlimit.Result{}, false
	}
	return redlimit.Result{
		Limit:      l.Max(),
		RetryAfter: d.until.Sub(now),
		ResetAfter: max(0, d.reset.Sub(now)),
		Source:     redlimit.FromDenyCache,
	}, true
}

// put remembers r, the store's answer to a request of cost n sent at
// start, if it is a denial with nothing remaining and a known retry-after.
func (c *denyCache) put(key string, l redlimit.Limit, n int64, start time.Time, r redlimit.Result) {
	if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter == redlimit.Never {
		return
	}
	// Measured from before the call, so the entry ends no later than the
	// store's own retry-after, however long the reply took.
	d := denial{until: start.Add(r.RetryAfter), reset: start.Add(r.ResetAfter), cost: n}
	sh := &c.shards[c.shard(key)]
	k := denyKey{key, l}
	sh.mu.Lock()
	if old, ok := sh.m[k]; ok && old.cost < n && start.Before(old.until) {
		d = old // keep the entry that answers more requests
	} else if !ok && len(sh.m) >= c.max {
		c.evict(sh.m, start)
	}
	sh.m[k] = d
	sh.mu.Unlock()
}

// evict removes expired entries among a sample, or one sampled entry.
func (c *denyCache) evict(m map[denyKey]denial, now time.Time) {
	var victim denyKey
	removed, seen := false, 0
	for k, d := range m {
		if !now.Before(d.until) {
			delete(m, k)
			removed = true
		} else {
			victim = k
		}
		if seen++; seen == 8 {
			break
		}
	}
	if !removed {
		delete(m, victim)
	}
}

// forget drops what is cached for key and l (after a Reset).
func (c *denyCache) forget(key string, l redlimit.Limit) {
	sh := &c.shards[c.shard(key)]
	sh.mu.Lock()
	delete(sh.m, denyKey{key, l})
	sh.mu.Unlock()
}

func (c *denyCache) len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].m)
		c.shards[i].mu.Unlock()
	}
	return n
}
