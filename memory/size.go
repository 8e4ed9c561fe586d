package memory

import "github.com/redlimit/redlimit"

// Estimated sizes of what a Store holds, in bytes, for WithMaxBytes. They
// are what the heap grows by. TestSizeEstimate measures them with
// runtime.MemStats; docs/BENCHMARKS.md has its figures.
const (
	// slotBytes is a key's share besides its bytes. It covers its slot:
	// lock, chain, key header and place in the sampler. It covers its node
	// in the sync.Map, with a share of the trie's inner nodes. It covers
	// its pointer in the sampler's array, which grows by doubling.
	slotBytes = 180
	// entryBytes is a state besides its sliding log's buffer: the entry
	// struct, rounded up to its size class.
	entryBytes = 192
	// logEntryBytes is one slot of a sliding log's buffer: the time of an
	// instant at which requests were admitted and the units before it.
	// (The allocator rounds a buffer up to its size class.)
	logEntryBytes = 16
	// recordBytes is a token bucket's refund record (refundable). The
	// first Admit that counts in the bucket makes it.
	recordBytes = 24
	// leaseKeyBytes is a key's share of its leases besides its bytes: its
	// place in the leases' map, its set, and the set's map.
	leaseKeyBytes = 288
	// leaseBytes is one lease besides its id's bytes: the lease, its
	// place in its key's map and in the heap.
	leaseBytes = 84
)

// keySize returns the estimated bytes a key takes besides its states: the
// store keeps the key's string.
func keySize(key string) int64 { return slotBytes + int64(len(key)) }

// leaseKeySize returns the estimated bytes a key with leases takes
// besides them.
func leaseKeySize(key string) int64 { return leaseKeyBytes + int64(len(key)) }

// leaseSize returns the estimated bytes of lease id.
func leaseSize(id string) int64 { return leaseBytes + int64(len(id)) }

// size returns the estimated bytes of e: the entry, its sliding log's
// buffer, which is kept at its capacity while e lives, and a token
// bucket's refund record.
func (e *entry) size() int64 {
	n := entryBytes + logEntryBytes*int64(cap(e.log.buf))
	if e.bucket.rec != nil {
		n += recordBytes
	}
	return n
}

// grows reports whether committing a request of cost n under p to e may
// change e.size(). Only a sliding log's buffer grows, when it is full and
// the request needs a new entry. To stay cheap, it also counts the entries
// the commit would trim. sizeAfter tells exactly.
func (e *entry) grows(p *params, n int64) bool {
	return p.alg == redlimit.SlidingLog && e.log.n == len(e.log.buf)
}

// sizeAfter returns at most what e.size() is after a request under p,
// allowed at now, is committed. It is committed to e, or to a new entry if
// e is nil. If admit (an admission of Store.Admit), it is also recorded
// for its refund. A sliding log keeps its live entries and at most one
// more, whatever the cost; commit trims the others. If they do not fit,
// ring.grow doubles the buffer, to at least four entries. A token bucket
// keeps its refund record once an admission made it (see record).
func (e *entry) sizeAfter(p *params, now, n int64, admit bool) int64 {
	var live, capacity, rec int64
	if e != nil {
		capacity = int64(cap(e.log.buf))
		if now < e.expires {
			first, _ := e.log.live(now - p.window)
			live = int64(e.log.n - first)
		}
	}
	if e != nil && e.bucket.rec != nil || admit && p.alg == redlimit.TokenBucket {
		rec = recordBytes
	}
	if p.alg != redlimit.SlidingLog || live+1 <= capacity {
		return entryBytes + logEntryBytes*capacity + rec
	}
	return entryBytes + logEntryBytes*max(4, 2*capacity) + rec
}
