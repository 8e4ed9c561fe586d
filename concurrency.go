package redlimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConcurrency reports a concurrency limit out of range: slots
// below 1 or above MaxSlots, or a TTL outside MinLeaseTTL..MaxLeaseTTL.
var ErrInvalidConcurrency = errors.New("redlimit: invalid concurrency limit")

// ErrInvalidLeaseID reports a lease id that is empty or too long.
var ErrInvalidLeaseID = errors.New("redlimit: invalid lease id")

// Bounds of a Concurrency limit.
const (
	MaxSlots    = 1 << 20
	MinLeaseTTL = 10 * time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
	// MaxLeaseIDLen is the longest lease id a store takes.
	MaxLeaseIDLen = 64
)

// Concurrency is a limit on how many holders may be in flight at once:
// at most Slots leases on a key. A lease lives TTL unless renewed, so a
// holder that dies frees its slot within TTL. Lowering Slots keeps the
// leases held: new ones wait until fewer than Slots remain.
type Concurrency struct {
	Slots int64
	TTL   time.Duration
	// Failure is what a resilient store answers while its store is away.
	Failure FailurePolicy
}

// InFlight returns a Concurrency of slots leases, each living ttl.
func InFlight(slots int64, ttl time.Duration) Concurrency {
	return Concurrency{Slots: slots, TTL: ttl}
}

// OnFailure returns c with the failure policy p.
func (c Concurrency) OnFailure(p FailurePolicy) Concurrency { c.Failure = p; return c }

// Validate reports whether c is in range, wrapping ErrInvalidConcurrency.
func (c Concurrency) Validate() error {
	if c.Slots < 1 || c.Slots > MaxSlots {
		return fmt.Errorf("%w: %d slots is not in 1..%d", ErrInvalidConcurrency, c.Slots, MaxSlots)
	}
	if c.TTL < MinLeaseTTL || c.TTL > MaxLeaseTTL {
		return fmt.Errorf("%w: TTL %v is not in %v..%v", ErrInvalidConcurrency, c.TTL, MinLeaseTTL, MaxLeaseTTL)
	}
	if c.TTL%time.Microsecond != 0 {
		return fmt.Errorf("%w: TTL %v is not whole microseconds", ErrInvalidConcurrency, c.TTL)
	}
	if c.Failure > FailClosed {
		return fmt.Errorf("%w: unknown failure policy %d", ErrInvalidConcurrency, c.Failure)
	}
	return nil
}

// ValidateLease checks a key, a concurrency limit and a lease id, as
// every store does before it touches any state.
func ValidateLease(key string, c Concurrency, id string) error {
	if key == "" {
		return ErrInvalidKey
	}
	if id == "" || len(id) > MaxLeaseIDLen {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidLeaseID, len(id), MaxLeaseIDLen)
	}
	return c.Validate()
}

// NewLeaseID returns a random lease id. A caller makes the id before
// Acquire, so it can release a lease whose reply it lost.
func NewLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Lease is the answer to a store's Acquire or Renew.
type Lease struct {
	// Held reports whether the lease holds a slot now.
	Held bool
	// InFlight is how many leases the key holds after the call.
	InFlight int64
	// RetryAfter is, when not held, the time until the first lease
	// expires: no slot frees by TTL sooner. Zero when held.
	RetryAfter time.Duration
	// Source says which path answered: the store, or a failure policy.
	Source Source
}

// Semaphore is a store of leases: a distributed counting semaphore.
// Implementations are safe for concurrent use.
type Semaphore interface {
	// Acquire takes a slot of c on key for the lease id, living c.TTL.
	// A lease that is held already is renewed: a retry is safe.
	// A full key is a Lease with Held false, not an error.
	Acquire(ctx context.Context, key string, c Concurrency, id string) (Lease, error)
	// Renew extends lease id by c.TTL from now. A lease that expired
	// (or that Redis lost) is not taken anew: Held is false. A holder
	// that still runs records it again with RecordLease, as Hold does.
	Renew(ctx context.Context, key string, c Concurrency, id string) (Lease, error)
	// Release frees lease id's slot; releasing a lease not held is a no-op.
	Release(ctx context.Context, key string, c Concurrency, id string) error
}
