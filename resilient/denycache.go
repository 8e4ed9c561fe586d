package resilient

import (
	"time"

	"github.com/redlimit/redlimit"
)

// DenyCacheOptions configure the deny cache, which answers the requests
// of a key the store denied with nothing left, until the store's
// retry-after, without asking it. The zero value of each field is its
// default.
type DenyCacheOptions struct {
	// Size bounds how many denials are remembered (default
	// [DefaultDenyCacheSize]). Negative: no deny cache.
	Size int
	// Bytes bounds the cache's bytes (default [DefaultCacheBytes]). An
	// entry is counted for 128 bytes plus its key, which is client data,
	// so that long keys cannot make it hold more. An entry larger than
	// its shard's share of the bound is not kept.
	Bytes int
}

// denyCache remembers denials the store answered with nothing remaining,
// until their retry-after. Further requests of the same key and limit are
// denied without asking the store. It never denies what the store would
// allow. Consumption by others only delays the moment a request can pass.
// The cache does not answer a request of a smaller cost than the one
// denied. Nor does it answer a limit with another Count or Burst.
//
// Entries are keyed by the state they describe ([redlimit.StateID]), as the
// store keeps it, so that a Reset drops them whatever the Count or the
// failure policy of the limit it names. A Reset or a refund through the
// Limiter drops the entries of its keys (forget). A denial the store may
// have made before that is not kept either: put drops a call sent before
// the latest forget of its shard.
type denyCache struct {
	*boundedMap[denial]
	forgot []time.Time // per shard, the latest forget; guarded by the shard's lock
}

type denial struct {
	until time.Time // the earliest the store could allow cost
	reset time.Time
	cost  int64
	count int64 // the limit denied: its Count and Burst
	burst int64
}

// matches reports whether d was cached for a limit of l's Count and Burst.
func (d *denial) matches(l redlimit.Limit) bool {
	return d.count == l.Count && d.burst == l.Burst
}

// newDenyCache returns a cache of at most size entries and maxBytes bytes in all.
func newDenyCache(size, maxBytes int) *denyCache {
	b := newBoundedMap(size, maxBytes, func(d *denial, now time.Time) bool { return !now.Before(d.until) })
	return &denyCache{b, make([]time.Time, len(b.shards))}
}

// forget drops the denial of key's state under l, at now: after the
// store's Reset or refund of it returned.
func (c *denyCache) forget(key string, l redlimit.Limit, now time.Time) {
	i := c.index(key)
	sh := &c.shards[i]
	sh.mu.Lock()
	c.remove(sh, l.StateID(key))
	if now.After(c.forgot[i]) {
		c.forgot[i] = now
	}
	sh.mu.Unlock()
}

// get returns the cached denial of a request of cost n at now, if any.
func (c *denyCache) get(key string, l redlimit.Limit, n int64, now time.Time) (redlimit.Result, bool) {
	sh := c.shard(key)
	k := l.StateID(key)
	sh.mu.Lock()
	d, ok := sh.m[k]
	if ok && !now.Before(d.until) {
		c.remove(sh, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || n < d.cost || !d.matches(l) {
		return redlimit.Result{}, false
	}
	return redlimit.Result{
		Max:        l.Max(),
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
	d := denial{until: start.Add(r.RetryAfter), reset: start.Add(r.ResetAfter), cost: n, count: l.Count, burst: l.Burst}
	i := c.index(key)
	sh := &c.shards[i]
	k := l.StateID(key)
	sh.mu.Lock()
	if !start.After(c.forgot[i]) {
		sh.mu.Unlock()
		return // the store may have denied before a forget's refund or Reset
	}
	if old, ok := sh.m[k]; ok && old.cost < n && start.Before(old.until) && old.matches(l) {
		d = old // keep the entry that answers more requests
	}
	c.insert(sh, k, d, start)
	sh.mu.Unlock()
}

// fromDenyCache answers reqs if the cache holds a denial for one of them.
// A decision that carries a debit is never answered from the cache: the
// debit has to be counted by the store whatever the decision.
func (l *Limiter) fromDenyCache(reqs []redlimit.Request, now time.Time) (redlimit.Decision, bool) {
	if l.deny == nil || hasDebit(reqs) {
		return redlimit.Decision{}, false
	}
	for i, r := range reqs {
		res, ok := l.deny.get(r.Key, r.Limit, r.Cost, now)
		if !ok {
			continue
		}
		d := redlimit.Decision{Results: make([]redlimit.Result, len(reqs))}
		for j, q := range reqs {
			// The other limits were not asked: shown as allowing, with
			// their whole allowance, which is not known here.
			d.Results[j] = redlimit.Result{Allowed: true, Max: q.Limit.Max(), Remaining: q.Limit.Max(), Source: redlimit.FromDenyCache}
		}
		d.Results[i] = res
		return d, true
	}
	return redlimit.Decision{}, false
}
