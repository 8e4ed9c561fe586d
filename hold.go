package redlimit

import (
	"context"
	"sync"
	"time"
)

// Hold acquires a slot of c on key from s for a holder that runs until it
// calls release, as an HTTP handler or a gRPC stream does. While held, the
// lease is recorded again every third of c.TTL with [RecordLease]. So a
// lease the store lost (a restart without persistence, a failover) counts
// again within a third of the TTL. Until then, new acquires may take its
// slot, and more than c.Slots may run. A holder that stalled past its TTL
// is recorded again too, even if its slot was given away: it still runs.
// release stops the renewals and releases the lease; it is safe to
// call more than once. When the lease is not held, release does nothing.
// The renewals and the release outlive ctx's cancellation: a holder's
// slot is freed even when its request was canceled.
func Hold(ctx context.Context, s Semaphore, key string, c Concurrency) (l Lease, release func(), err error) {
	id := NewLeaseID()
	l, err = s.Acquire(ctx, key, c, id)
	if err != nil || !l.Held {
		return l, func() {}, err
	}
	bg := context.WithoutCancel(ctx)
	renewing, stop := context.WithCancel(bg) // release stops a renewal's retries too
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-renewing.Done():
				return
			case <-t.C:
				renew(renewing, s, key, c, id)
			}
		}
	}()
	var once sync.Once
	return l, func() {
		once.Do(func() {
			stop()
			<-done
			rctx, cancel := context.WithTimeout(bg, c.TTL)
			defer cancel()
			_ = s.Release(rctx, key, c, id) // a lease not released frees at its TTL
		})
	}, nil
}

// renew records lease id again with RecordLease, trying until it succeeds
// or a third of the TTL has passed: the first call after a Redis restart
// may fail on a dead connection. Errors are dropped; the lease frees at
// its TTL if renewals keep failing.
func renew(ctx context.Context, s Semaphore, key string, c Concurrency, id string) {
	ctx, cancel := context.WithTimeout(ctx, c.TTL/3)
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		if _, err := RecordLease(ctx, s, key, c, id); err == nil {
			return
		}
		if sleep(ctx, wait) != nil {
			return
		}
	}
}

// RecordLease acquires lease id on key for c.TTL whatever the key holds:
// c.Slots is not checked. It counts a holder that runs already, whose
// lease the store lost or never had. A lease held already is renewed.
// The key may then hold more leases than its slots; its acquires are
// refused until enough of them end.
func RecordLease(ctx context.Context, s Semaphore, key string, c Concurrency, id string) (Lease, error) {
	c.Slots = MaxSlots
	return s.Acquire(ctx, key, c, id)
}
