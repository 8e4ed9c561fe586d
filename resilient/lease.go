package resilient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

var _ redlimit.Semaphore = (*Limiter)(nil)

// ErrNoLeases reports a Limiter whose store keeps no leases (it is not a
// [redlimit.Semaphore]).
var ErrNoLeases = errors.New("resilient: the store keeps no leases")

// Acquire takes a slot of c on key through the store, with the deadline
// and the breaker of the Limiter's decisions. When the store fails,
// c.Failure answers. FailLocal takes a slot of this node's share in the
// local fallback: Slots divided by the live nodes, rounded up. FailOpen
// holds. FailClosed does not, with RetryAfter the breaker's cool-down.
// The store's leases still expire at their TTL meanwhile. Once the store
// answers again, it gets the local leases, with their ids and time left,
// and counts them.
func (l *Limiter) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return l.lease(ctx, key, c, id, redlimit.Semaphore.Acquire)
}

// Renew extends lease id through the store. When the store fails, c.Failure
// answers as for Acquire: the lease holds on while its policy says so.
func (l *Limiter) Renew(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return l.lease(ctx, key, c, id, redlimit.Semaphore.Renew)
}

// Release frees lease id in the store and in the local fallback. When the
// store fails, it returns nil: the store's lease frees at its TTL.
func (l *Limiter) Release(ctx context.Context, key string, c redlimit.Concurrency, id string) error {
	s, err := l.semaphore(key, c, id)
	if err != nil {
		return err
	}
	// Released locally first, id is not sent to the store with the
	// other local leases.
	if loc, ok := l.local.lim.(redlimit.Semaphore); ok {
		_ = loc.Release(policyContext(ctx), key, l.leaseShare(c), id) // a no-op for a lease it does not hold
	}
	if err = l.reconcileLeases(ctx, key); err == nil {
		_, err = l.leaseCall(ctx, func(ctx context.Context) (redlimit.Lease, error) {
			return redlimit.Lease{}, s.Release(ctx, key, c, id)
		})
	}
	if err != nil && !errors.Is(err, ErrStore) {
		return err
	}
	return nil
}

// semaphore returns the store's leases, after checking the input.
func (l *Limiter) semaphore(key string, c redlimit.Concurrency, id string) (redlimit.Semaphore, error) {
	if err := redlimit.ValidateLease(key, c, id); err != nil {
		return nil, fmt.Errorf("resilient: %w", err)
	}
	s, ok := l.store.(redlimit.Semaphore)
	if !ok {
		return nil, ErrNoLeases
	}
	return s, nil
}

// lease runs op (Acquire or Renew) on the store, or its failure policy.
func (l *Limiter) lease(ctx context.Context, key string, c redlimit.Concurrency, id string,
	op func(redlimit.Semaphore, context.Context, string, redlimit.Concurrency, string) (redlimit.Lease, error)) (redlimit.Lease, error) {
	s, err := l.semaphore(key, c, id)
	if err != nil {
		return redlimit.Lease{}, err
	}
	var res redlimit.Lease
	if err = l.reconcileLeases(ctx, key); err == nil {
		res, err = l.leaseCall(ctx, func(ctx context.Context) (redlimit.Lease, error) { return op(s, ctx, key, c, id) })
	}
	if err == nil || !errors.Is(err, ErrStore) {
		return res, err
	}
	if c.Failure == redlimit.FailOpen {
		return redlimit.Lease{Held: true, Source: redlimit.FromFailOpen}, nil
	}
	loc, ok := l.local.lim.(redlimit.Semaphore)
	if c.Failure == redlimit.FailClosed || !ok {
		return redlimit.Lease{RetryAfter: l.breaker.coolDown, Source: redlimit.FromFailClosed}, nil
	}
	// A renewal takes a local slot too: the store's lease is out of reach.
	l.rec.grantMu.Lock()
	res, err = loc.Acquire(policyContext(ctx), key, l.leaseShare(c), id)
	_, owed := loc.(leaseLister)
	owed = owed && err == nil && res.Held
	if owed && l.rec.granted != nil {
		l.rec.granted[[2]string{key, id}] = true
	}
	l.rec.grantMu.Unlock()
	res.Source = redlimit.FromLocal
	if owed {
		l.rec.leases.Add(1) // owed to the store (see reconcileLeases)
		l.kick()
	}
	return res, err
}

// leaseLister is a local fallback that lists its leases (memory.Store).
type leaseLister interface {
	Leases(ctx context.Context) ([]memory.HeldLease, error)
}

// reconcileLeases gives the store the leases the local fallback holds on
// key (all of them, for key ""): those it granted while the store failed.
// Each is recorded in the store ([redlimit.RecordLease]) with its id and
// its time left at the send, even on a full key, as a debit is counted.
// Then it is released in the fallback, unless granted again since it was
// listed: the next pass sends that grant. So the store counts them once
// it is back, and their renewals and releases find them there. It runs
// before each lease call to the store, for its key.
// It runs in the background reconciliation for all keys; a local grant
// starts that. With redisstore's DebitOnce, the background probes the
// open breaker every retryPause. So an idle node's leases reach the store
// too. While it runs, this node's other lease calls wait. It returns the
// first error, wrapping ErrStore when the store failed. The background
// goes on with the other keys while the breaker stays closed (a Cluster
// master down).
func (l *Limiter) reconcileLeases(ctx context.Context, key string) error {
	if l.rec.leases.Load() == 0 {
		return nil
	}
	select {
	case l.rec.leasesBusy <- struct{}{}:
		defer func() { <-l.rec.leasesBusy }()
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		return fmt.Errorf("%w: waiting for the local leases to reach the store: %w", ErrStore, ctx.Err())
	}
	n := l.rec.leases.Load()
	if n == 0 {
		return nil
	}
	loc := l.local.lim.(leaseLister) // counted only for a leaseLister
	l.rec.grantMu.Lock()
	held, err := loc.Leases(policyContext(ctx))
	l.rec.granted = map[[2]string]bool{} // marked while this pass runs
	l.rec.grantMu.Unlock()
	defer func() {
		l.rec.grantMu.Lock()
		l.rec.granted = nil
		l.rec.grantMu.Unlock()
	}()
	if err != nil {
		return fmt.Errorf("resilient: the local leases: %w", err)
	}
	listed := time.Now()              // the fallback's clock: each lease's Left counts from here
	s := l.store.(redlimit.Semaphore) // a lease was granted: the store has leases
	var first error
	failed := map[string]bool{} // keys whose leases wait for the next pass
	for _, h := range held {
		if key != "" && h.Key != key || failed[h.Key] {
			continue
		}
		// Its time left now: earlier sends may have been slow.
		left := h.Left - time.Since(listed)
		if left <= 0 {
			continue // expired here too
		}
		c := redlimit.InFlight(1, max(redlimit.MinLeaseTTL, left.Round(time.Microsecond)))
		if _, err := l.leaseCall(ctx, func(ctx context.Context) (redlimit.Lease, error) {
			return redlimit.RecordLease(ctx, s, h.Key, c, h.ID) // whatever the key holds
		}); err != nil {
			if first == nil {
				first = err
			}
			if key != "" || !errors.Is(err, ErrStore) || !l.breaker.closed() {
				return first
			}
			failed[h.Key] = true
			continue
		}
		// A lease granted again since the listing stays: the next pass
		// sends its time left.
		l.rec.grantMu.Lock()
		if !l.rec.granted[[2]string{h.Key, h.ID}] {
			_ = loc.(redlimit.Semaphore).Release(policyContext(ctx), h.Key, c, h.ID)
		}
		l.rec.grantMu.Unlock()
	}
	if key == "" && first == nil {
		l.rec.leases.CompareAndSwap(n, 0) // leases granted meanwhile wait for the next pass
	}
	return first
}

// leaseShare returns c with this node's share of its slots.
func (l *Limiter) leaseShare(c redlimit.Concurrency) redlimit.Concurrency {
	c.Slots = ceilDiv(c.Slots, int64(max(1, l.local.nodes.Nodes())))
	return c
}

// leaseCall makes call through the breaker, within the store's deadline.
// Its error wraps ErrStore when the store failed or the breaker is open;
// a caller that went away gets its context's error.
func (l *Limiter) leaseCall(ctx context.Context, call func(context.Context) (redlimit.Lease, error)) (redlimit.Lease, error) {
	done, err := l.breaker.Allow()
	if err != nil {
		return redlimit.Lease{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	deadline := l.storeDeadline(ctx, l.now())
	if deadline <= 0 {
		done(errNoTime)
		return redlimit.Lease{}, fmt.Errorf("%w: %w", ErrStore, errNoTime)
	}
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	res, err := call(cctx)
	switch {
	case err == nil:
		done(nil)
		return res, nil
	case errors.Is(ctx.Err(), context.Canceled):
		done(errCallerGone)
		return res, ctx.Err()
	case callersOwn(err):
		done(err)
		return res, err
	}
	err = fmt.Errorf("%w: %w", ErrStore, err)
	done(err)
	return res, err
}
