package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Semaphore = (*Store)(nil)

// leases holds the leases of every key: lease id → expiry, µs. A key's
// expired leases go at its next call; all of them, when the store is full.
type leases struct {
	mu   sync.Mutex
	keys map[string]map[string]int64
	n    int64 // leases held, in all keys
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
		for id, e := range set {
			if e > now {
				out = append(out, HeldLease{Key: key, ID: id, Left: us(e - now)})
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
	t.trim(set, now)
	_, held := set[id]
	n := int64(len(set))
	var res redlimit.Lease
	switch {
	case op == 'x':
		if held {
			delete(set, id)
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
			if set == nil {
				if t.keys == nil {
					t.keys = make(map[string]map[string]int64)
				}
				set = make(map[string]int64)
				t.keys[key] = set
			}
			t.n++
		}
		set[id] = now + c.TTL.Microseconds()
		res.Held = true
	case n > 0:
		first := int64(-1)
		for _, e := range set {
			if first < 0 || e < first {
				first = e
			}
		}
		res.RetryAfter = us(first - now)
	}
	res.InFlight = int64(len(set))
	if len(set) == 0 {
		delete(t.keys, key)
	}
	return res, nil
}

// trim deletes set's leases that expired by now.
func (t *leases) trim(set map[string]int64, now int64) {
	for id, e := range set {
		if e <= now {
			delete(set, id)
			t.n--
		}
	}
}

// trimAll trims every key, and drops those left empty.
func (t *leases) trimAll(now int64) {
	for k, set := range t.keys {
		t.trim(set, now)
		if len(set) == 0 {
			delete(t.keys, k)
		}
	}
}
