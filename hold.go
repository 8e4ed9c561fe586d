package redlimit

import (
	"context"
	"sync"
	"time"
)

// Hold acquires a slot of c on key from s for a holder that runs until it
// calls release, as an HTTP handler or a gRPC stream does. While held, the
// lease is renewed every third of c.TTL; a lease found lost (expired, or
// gone with a Redis that lost its data) is acquired again if a slot is
// free. If none is, the holder runs on without one: Slots may be passed
// until it returns. release stops the renewals and releases the lease; it
// is safe to call more than once. When the lease is not held, release does
// nothing.
// The renewals and the release outlive ctx's cancellation: a holder's
// slot is freed even when its request was canceled.
func Hold(ctx context.Context, s Semaphore, key string, c Concurrency) (l Lease, release func(), err error) {
	id := NewLeaseID()
	l, err = s.Acquire(ctx, key, c, id)
	if err != nil || !l.Held {
		return l, func() {}, err
	}
	bg := context.WithoutCancel(ctx)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				renew(bg, s, key, c, id)
			}
		}
	}()
	var once sync.Once
	return l, func() {
		once.Do(func() {
			close(stop)
			<-done
			rctx, cancel := context.WithTimeout(bg, c.TTL)
			defer cancel()
			_ = s.Release(rctx, key, c, id) // a lease not released frees at its TTL
		})
	}, nil
}

// renew renews lease id, or acquires it again if it was lost. Its errors
// are dropped: the lease frees at its TTL if renewals keep failing.
func renew(ctx context.Context, s Semaphore, key string, c Concurrency, id string) {
	ctx, cancel := context.WithTimeout(ctx, c.TTL/3)
	defer cancel()
	if l, err := s.Renew(ctx, key, c, id); err == nil && !l.Held {
		_, _ = s.Acquire(ctx, key, c, id)
	}
}
