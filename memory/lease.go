package memory

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Semaphore = (*Store)(nil)

// leases holds the leases of every key. A key's expired leases go at its
// next call; all of them, when the store is full, and at each Sweep.
// Their estimated bytes count in the store's (WithMaxBytes).
type leases struct {
	mu   sync.Mutex
	keys map[string]*leaseSet
	n    int64 // leases held, in all keys
	// trimAt is a time no lease expires before. A full store's flood
	// of acquires trims all keys once per expiry, not once per call.
	trimAt int64
}

// leaseSet is one key's leases: a min-heap by expiry (µs), with each
// lease found by id, so that a call costs O(log n), not a scan.
type leaseSet struct {
	byID map[string]*lease
	heap []*lease
}

type lease struct {
	id  string
	exp int64
	i   int // its index in heap
}

func (s *leaseSet) Len() int           { return len(s.heap) }
func (s *leaseSet) Less(i, j int) bool { return s.heap[i].exp < s.heap[j].exp }
func (s *leaseSet) Swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].i, s.heap[j].i = i, j
}
func (s *leaseSet) Push(x any) { l := x.(*lease); l.i = len(s.heap); s.heap = append(s.heap, l) }
func (s *leaseSet) Pop() any {
	l := s.heap[len(s.heap)-1]
	s.heap[len(s.heap)-1] = nil // the lease may be freed
	s.heap = s.heap[:len(s.heap)-1]
	return l
}

// set gives lease id the expiry exp, adding it if s does not hold it.
func (s *leaseSet) set(id string, exp int64) {
	if l, ok := s.byID[id]; ok {
		l.exp = exp
		heap.Fix(s, l.i)
		return
	}
	l := &lease{id: id, exp: exp}
	s.byID[id] = l
	heap.Push(s, l)
}

// remove deletes lease id, which s holds, and returns its size.
func (s *leaseSet) remove(id string) int64 {
	heap.Remove(s, s.byID[id].i)
	delete(s.byID, id)
	s.shrink()
	return leaseSize(id)
}

// trim deletes the leases that expired by now. It returns how many, and
// their size.
func (s *leaseSet) trim(now int64) (n, bytes int64) {
	for len(s.heap) > 0 && s.heap[0].exp <= now {
		id := heap.Pop(s).(*lease).id
		delete(s.byID, id)
		n, bytes = n+1, bytes+leaseSize(id)
	}
	if n > 0 {
		s.shrink()
	}
	return n, bytes
}

// shrink rebuilds a set that fills at most a quarter of its heap. A
// Go map or slice never shrinks, and WithMaxBytes counts the leases held.
// A rebuild copies fewer leases than were removed since the last one.
func (s *leaseSet) shrink() {
	if cap(s.heap) <= 8 || len(s.heap) > cap(s.heap)/4 {
		return
	}
	s.heap = slices.Clone(s.heap)
	s.byID = make(map[string]*lease, len(s.heap))
	for _, l := range s.heap {
		s.byID[l.id] = l
	}
}

// Acquire takes a slot of c on key for lease id, living c.TTL: what
// redisstore's Acquire answers. The store holds at most its WithMaxKeys
// bound of leases. Their keys and ids count in its WithMaxBytes bound.
// Past either, a new lease is denied, as a full store denies a new key's
// request, and counted in [Stats].Refused. Its RetryAfter is when the
// store's first lease expires, at least a millisecond. A lease of
// [redlimit.MaxSlots], as [redlimit.RecordLease] makes, records a holder
// that runs. Like a debit, it may go an eighth beyond the bounds.
func (s *Store) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return s.lease(ctx, 'a', key, c, id)
}

// Renew extends lease id by c.TTL from now, if it still holds its slot.
func (s *Store) Renew(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return s.lease(ctx, 'r', key, c, id)
}

// Release frees lease id's slot, if it holds one.
func (s *Store) Release(ctx context.Context, key string, c redlimit.Concurrency, id string) error {
	_, err := s.lease(ctx, 'x', key, c, id)
	return err
}

// HeldLease is a lease a Store holds: its key, its id and its time left.
type HeldLease struct {
	Key, ID string
	Left    time.Duration
}

// Leases returns the leases the store holds, in no order.
func (s *Store) Leases(ctx context.Context) ([]HeldLease, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	now := s.micros()
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []HeldLease
	for key, set := range t.keys {
		for _, l := range set.heap {
			if l.exp > now {
				out = append(out, HeldLease{Key: key, ID: l.id, Left: us(l.exp - now)})
			}
		}
	}
	return out, nil
}

// lease decides op ('a' acquire, 'r' renew, 'x' release) as
// redisstore/lua/lease.lua does. A new lease claims its room first. A
// store without room evicts idle states, with the leases' lock released.
func (s *Store) lease(ctx context.Context, op byte, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if err := redlimit.ValidateLease(key, c, id); err != nil {
		return redlimit.Lease{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Lease{}, err
	}
	for final := false; ; final = true {
		now := s.micros()
		res, need := s.leaseLocked(op, key, c, id, now, final)
		if need == 0 || final {
			return res, nil
		}
		s.evict(now, room{bytes: need})
	}
}

// leaseLocked is lease under the leases' lock, at now. When a new lease
// finds no room and final is false, it returns the bytes it needs, and
// decides nothing. When final is true, it refuses the lease.
func (s *Store) leaseLocked(op byte, key string, c redlimit.Concurrency, id string, now int64, final bool) (redlimit.Lease, int64) {
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	// A key's set is in the map, its bytes counted, while it holds a lease.
	set := t.keys[key]
	if set == nil {
		set = &leaseSet{}
	} else if s.trimLeases(set, now); set.Len() == 0 {
		s.dropLeaseKey(key)
	}
	_, held := set.byID[id]
	n := int64(set.Len())
	var res redlimit.Lease
	switch {
	case op == 'x':
		if held {
			s.bytes.Add(-set.remove(id))
			t.n--
		}
	case held || op == 'a' && n < c.Slots:
		if !held {
			need := leaseSize(id)
			if n == 0 {
				need += leaseKeySize(key)
			}
			maxLeases, maxBytes := s.max, s.maxBytes
			if final && c.Slots == redlimit.MaxSlots {
				maxLeases, maxBytes = s.overMax, s.overBytes // a record, counted as a debit is
			}
			if ok, soonest := s.claimLease(need, now, maxLeases, maxBytes); !ok {
				if !final {
					return res, need
				}
				// Denied, as a full store denies a new key's request:
				// an error would let a caller serve it unlimited.
				s.refused.Add(1)
				res.InFlight, res.RetryAfter = n, redlimit.Never
				if need <= maxBytes {
					res.RetryAfter = time.Millisecond
					if soonest != math.MaxInt64 {
						res.RetryAfter = max(us(soonest-now), res.RetryAfter)
					}
				}
				return res, 0
			}
			if set.byID == nil {
				set.byID = make(map[string]*lease)
			}
			if t.keys == nil {
				t.keys = make(map[string]*leaseSet)
			}
			t.keys[key] = set
			t.n++
		}
		exp := now + c.TTL.Microseconds()
		set.set(id, exp)
		t.trimAt = min(t.trimAt, exp)
		res.Held = true
	case n > 0:
		res.RetryAfter = us(set.heap[0].exp - now)
	}
	res.InFlight = int64(set.Len())
	if set.Len() == 0 && held {
		s.dropLeaseKey(key)
	}
	return res, 0
}

// claimLease takes a new lease's room, need bytes, within the bounds of
// the leases' count and the bytes. A full store first trims every key's
// leases expired at now. The leases' lock is held. Without room, it
// returns when the first lease may expire (math.MaxInt64: none held).
func (s *Store) claimLease(need, now, maxLeases, maxBytes int64) (ok bool, soonest int64) {
	t := &s.leases
	if t.n < maxLeases && take(&s.bytes, need, maxBytes) {
		return true, 0
	}
	s.trimAllLeases(now)
	return t.n < maxLeases && take(&s.bytes, need, maxBytes), t.trimAt
}

// trimLeases trims set's expired leases, whose lock is held.
func (s *Store) trimLeases(set *leaseSet, now int64) {
	n, bytes := set.trim(now)
	s.leases.n -= n
	s.bytes.Add(-bytes)
}

// trimAllLeases trims every key's expired leases, and drops the keys
// left empty, unless no lease expired since the last time. The leases'
// lock is held.
func (s *Store) trimAllLeases(now int64) {
	t := &s.leases
	if now < t.trimAt {
		return
	}
	t.trimAt = math.MaxInt64
	for k, set := range t.keys {
		if s.trimLeases(set, now); set.Len() == 0 {
			s.dropLeaseKey(k)
		} else {
			t.trimAt = min(t.trimAt, set.heap[0].exp)
		}
	}
}

// dropLeaseKey removes key's set, left empty, from the map. The leases'
// lock is held.
func (s *Store) dropLeaseKey(key string) {
	delete(s.leases.keys, key)
	s.bytes.Add(-leaseKeySize(key))
}
