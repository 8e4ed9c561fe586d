package redisstore

import (
	"context"
	"fmt"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Semaphore = (*Store)(nil)

// leaseKey returns the key of the leases of key: a ZSET beside the
// limits' keys, with the same hash tag.
func (s *Store) leaseKey(key string) string {
	return s.prefix + "{" + hashTag(key) + "}:lease"
}

// Acquire takes a slot of c on key for lease id, living c.TTL by the
// Redis server's clock (or the store's, with WithClock). Trimming the
// expired leases, counting and adding run in one script call: no two
// callers can take the last slot. A lease held already is renewed.
func (s *Store) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return s.lease(ctx, kindAcquire, "acquire", key, c, id)
}

// Renew extends lease id by c.TTL from now, if it still holds its slot.
func (s *Store) Renew(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return s.lease(ctx, kindRenew, "renew", key, c, id)
}

// Release frees lease id's slot, if it holds one.
func (s *Store) Release(ctx context.Context, key string, c redlimit.Concurrency, id string) error {
	_, err := s.lease(ctx, kindRelease, "release", key, c, id)
	return err
}

// lease runs one lease entry of kind (lua/lease.lua).
func (s *Store) lease(ctx context.Context, kind entryKind, op, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if err := redlimit.ValidateLease(key, c, id); err != nil {
		return redlimit.Lease{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	w := s.newWire()
	w.lease(kind, s.leaseKey(key), c, id)
	r, err := s.call(ctx, op, &w)
	if err != nil {
		return redlimit.Lease{}, err
	}
	v := r.values(3)
	if !r.ok() || v[1] < 0 || v[2] < 0 {
		return redlimit.Lease{}, badReply(op, r)
	}
	return redlimit.Lease{Held: v[0] == 1, InFlight: v[1], RetryAfter: fromMicros(v[2])}, nil
}
