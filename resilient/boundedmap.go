package resilient

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

// maxShards is the most shards a boundedMap has.
const maxShards = 16

// entryBytes is what an entry of a boundedMap is counted for besides its
// key's bytes: the map's slot (the state key's header, algorithm and period,
// the value, a share of the map's buckets).
const entryBytes = 128

// boundedMap is a map by state ([redlimit.StateID]) of at most size
// entries and about maxBytes bytes. An entry counts entryBytes plus its
// key's bytes: keys are client data, as long as a caller accepts. The map
// is in shards locked apart, so unrelated keys seldom contend. A new entry
// in a full shard evicts the stale entries among a sample of eight. If
// none is stale, it evicts one of them, until the entry fits. An entry
// larger than a shard's share of maxBytes is not kept.
type boundedMap[V any] struct {
	seed     maphash.Seed
	max      int // entries per shard
	maxBytes int // bytes per shard
	shards   []mapShard[V]
	stale    func(v *V, now time.Time) bool
}

type mapShard[V any] struct {
	mu    sync.Mutex
	m     map[redlimit.StateID]V
	bytes int
}

// newBoundedMap returns a map of at most size entries and maxBytes bytes in
// all: as many shards as the entries allow, up to maxShards. stale tells the
// entries that eviction removes first.
func newBoundedMap[V any](size, maxBytes int, stale func(v *V, now time.Time) bool) *boundedMap[V] {
	n := min(maxShards, max(1, size))
	b := &boundedMap[V]{seed: maphash.MakeSeed(), max: max(1, size/n), maxBytes: max(1, maxBytes/n),
		shards: make([]mapShard[V], n), stale: stale}
	for i := range b.shards {
		b.shards[i].m = make(map[redlimit.StateID]V)
	}
	return b
}

func sizeOf(k redlimit.StateID) int { return entryBytes + len(k.Key) }

// shard returns the shard of key, to be locked by the caller.
func (b *boundedMap[V]) shard(key string) *mapShard[V] { return &b.shards[b.index(key)] }

// index returns the index of key's shard in b.shards.
func (b *boundedMap[V]) index(key string) int {
	return int(maphash.String(b.seed, key) % uint64(len(b.shards)))
}

// insert sets sh.m[k] = v, making room first if k is new and sh is full
// (in entries or bytes). An entry too large for the shard is not kept. The
// caller holds sh.mu.
func (b *boundedMap[V]) insert(sh *mapShard[V], k redlimit.StateID, v V, now time.Time) {
	if _, ok := sh.m[k]; ok {
		sh.m[k] = v
		return
	}
	size := sizeOf(k)
	if size > b.maxBytes {
		return
	}
	for len(sh.m) > 0 && (len(sh.m) >= b.max || sh.bytes+size > b.maxBytes) {
		b.evict(sh, now)
	}
	sh.m[k] = v
	sh.bytes += size
}

// evict removes the stale entries among a sample, or one sampled entry.
func (b *boundedMap[V]) evict(sh *mapShard[V], now time.Time) {
	var victim redlimit.StateID
	removed, seen := false, 0
	for k, v := range sh.m {
		if b.stale(&v, now) {
			b.remove(sh, k)
			removed = true
		} else {
			victim = k
		}
		if seen++; seen == 8 {
			break
		}
	}
	if !removed {
		b.remove(sh, victim)
	}
}

// remove deletes k from sh, whose lock the caller holds.
func (b *boundedMap[V]) remove(sh *mapShard[V], k redlimit.StateID) {
	if _, ok := sh.m[k]; ok {
		delete(sh.m, k)
		sh.bytes -= sizeOf(k)
	}
}

// forget drops the entry of the state of key and l.
func (b *boundedMap[V]) forget(key string, l redlimit.Limit) {
	sh := b.shard(key)
	sh.mu.Lock()
	b.remove(sh, l.StateID(key))
	sh.mu.Unlock()
}

// bytes returns how many bytes b's entries are counted for.
func (b *boundedMap[V]) bytes() int {
	n := 0
	for i := range b.shards {
		b.shards[i].mu.Lock()
		n += b.shards[i].bytes
		b.shards[i].mu.Unlock()
	}
	return n
}

// len returns how many entries b holds.
func (b *boundedMap[V]) len() int {
	n := 0
	for i := range b.shards {
		b.shards[i].mu.Lock()
		n += len(b.shards[i].m)
		b.shards[i].mu.Unlock()
	}
	return n
}
