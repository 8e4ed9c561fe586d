package memory

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Semaphore = (*Store)(nil)

// leases holds the leases of every key. A key's expired leases go at its
// next call; all of them, when the store is full.
type leases struct {
	mu   sync.Mutex
	keys map[string]*leaseSet
	n    int64 // leases held, in all keys
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

// remove deletes lease id, which s holds.
func (s *leaseSet) remove(id string) {
	heap.Remove(s, s.byID[id].i)
	delete(s.byID, id)
}

// trim deletes the leases that expired by now, and returns how many.
func (s *leaseSet) trim(now int64) (n int64) {
	for len(s.heap) > 0 && s.heap[0].exp <= now {
		delete(s.byID, heap.Pop(s).(*lease).id)
		n++
	}
	return n
}

// Acquire takes a slot of c on key for lease id, living c.TTL: what
// redisstore's Acquire answers. The store holds at most its WithMaxKeys
// bound of leases; past it, Acquire of a new lease fails with ErrFull.
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
// redisstore/lua/lease.lua does.
func (s *Store) lease(ctx context.Context, op byte, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if err := redlimit.ValidateLease(key, c, id); err != nil {
		return redlimit.Lease{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Lease{}, err
	}
	now := s.micros()
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.keys[key]
	if set == nil {
		set = &leaseSet{}
	}
	t.n -= set.trim(now)
	_, held := set.byID[id]
	n := int64(set.Len())
	var res redlimit.Lease
	switch {
	case op == 'x':
		if held {
			set.remove(id)
			t.n--
		}
	case held || op == 'a' && n < c.Slots:
		if !held {
			if t.n >= s.max {
				t.trimAll(now)
			}
			if t.n >= s.max {
				return redlimit.Lease{}, fmt.Errorf("memory: acquire: %w", ErrFull)
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
		set.set(id, now+c.TTL.Microseconds())
		res.Held = true
	case n > 0:
		res.RetryAfter = us(set.heap[0].exp - now)
	}
	res.InFlight = int64(set.Len())
	if set.Len() == 0 {
		delete(t.keys, key)
	}
	return res, nil
}

// trimAll trims every key, and drops those left empty.
func (t *leases) trimAll(now int64) {
	for k, set := range t.keys {
		t.n -= set.trim(now)
		if set.Len() == 0 {
			delete(t.keys, k)
		}
	}
}
