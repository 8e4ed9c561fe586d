package redlimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Queuer is a [Limiter] that can queue a token bucket's request. It
// queues the request at a future instant, as GCRA allows. So waiters
// sharing a limit are spaced at its rate without polling. The memory and
// redisstore stores implement it.
type Queuer interface {
	Limiter
	// Queue takes n tokens of limit, a [TokenBucket], for key at the
	// first instant they conform, if that is at most maxWait from now.
	// The bucket's arrival time moves on by n tokens at once, even into
	// the future, so each later request queues behind this one. A
	// request that would wait longer is refused and takes nothing. So is
	// one that would move the arrival time past 2^53 µs after the Unix
	// epoch (the year 2255), where a debit stops it too.
	Queue(ctx context.Context, key string, limit Limit, n int64, maxWait time.Duration) (Turn, error)
	// Unqueue gives back r's place, and reports whether it did. It gives
	// back all of r's tokens while the bucket's arrival time is still the
	// one r wrote: nothing was admitted, queued, debited or refunded on it
	// since. Otherwise it gives back nothing: the later turns keep their
	// instants, and the bucket stays on the strict side (exact would move
	// them). A bucket Reset since and brought to the very same µs is
	// taken as unchanged. Give a turn back once: a second Unqueue may
	// give back a later turn that took the same place. Unqueue trusts r,
	// as Reset trusts its caller: give back only turns Queue returned.
	Unqueue(ctx context.Context, r Turn) (bool, error)
}

// Turn is the answer of [Queuer.Queue].
type Turn struct {
	// Result is the queue's answer. Allowed: the request is queued, and
	// admitted after Delay. Otherwise it was refused: RetryAfter is how
	// long until it could pass without waiting ([Never]: its cost exceeds
	// the burst), and nothing was taken.
	Result
	// Delay is how long until the queued request is admitted: 0 for a
	// request admitted now.
	Delay time.Duration
	// Key, Limit and Cost are the request's.
	Key   string
	Limit Limit
	Cost  int64
	// TAT is the bucket's arrival time (µs) the turn wrote, for
	// Unqueue.
	TAT int64
}

// MaxWait is the longest wait [Wait] and [Queuer.Queue] take.
const MaxWait = MaxPeriod

// ValidateQueue checks a request for [Queuer.Queue]: a valid request of a
// [TokenBucket] and a maxWait of 0..[MaxWait]. Errors wrap the sentinels.
func ValidateQueue(key string, limit Limit, n int64, maxWait time.Duration) error {
	if err := ValidateRequest(key, limit, n); err != nil {
		return err
	}
	if limit.Algorithm != TokenBucket {
		return fmt.Errorf("%w: %s", ErrQueueAlgorithm, limit.Algorithm)
	}
	return validateWait(maxWait)
}

// validateWait checks a maxWait of 0..[MaxWait], wrapping ErrInvalidWait.
func validateWait(maxWait time.Duration) error {
	if maxWait < 0 || maxWait > MaxWait {
		return fmt.Errorf("%w: %s is not in 0..%s", ErrInvalidWait, maxWait, MaxWait)
	}
	return nil
}

// Wait blocks until a request of cost n under limit is admitted for key,
// or ctx ends, or its wait would pass maxWait (or ctx's deadline). A
// request that would wait longer is denied at once: Wait returns the
// denial, as AllowN does, with a nil error. When ctx ends first, Wait
// returns ctx's error, and the request holds nothing.
//
// A [TokenBucket] on a [Queuer] takes its place in line atomically
// ([Queuer.Queue]). Waiters are admitted in the order they queued, spaced
// at the rate. That holds across every process sharing the store. A waiter
// whose ctx ends gives its place back ([Queuer.Unqueue]). A ctx that ends
// while Queue's call is in flight may lose the store's answer. Then the
// place stays taken: the limit errs on the strict side.
//
// The window algorithms, and a token bucket on a Limiter that cannot
// queue (resilient.Limiter), retry after each denial's RetryAfter, with up
// to a tenth more of random jitter. That is not FIFO: a waiter may be
// overtaken, and many may retry together after a window ends.
func Wait(ctx context.Context, l Limiter, key string, limit Limit, n int64, maxWait time.Duration) (Result, error) {
	if err := validateWait(maxWait); err != nil {
		return Result{}, err
	}
	start := time.Now()
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(0, min(maxWait, dl.Sub(start)))
	}
	if q, ok := l.(Queuer); ok && limit.Algorithm == TokenBucket {
		return waitQueued(ctx, q, key, limit, n, maxWait)
	}
	for {
		res, err := l.AllowN(ctx, key, limit, n)
		if err != nil || res.Allowed {
			return res, err
		}
		left := maxWait - time.Since(start)
		if res.RetryAfter > left || left <= 0 {
			return res, nil
		}
		// At least a millisecond: a RetryAfter of 0 or less would spin.
		d := max(res.RetryAfter, time.Millisecond)
		if err := sleep(ctx, min(d+rand.N(d/10+1), left)); err != nil {
			return Result{}, err
		}
	}
}

func waitQueued(ctx context.Context, q Queuer, key string, limit Limit, n int64, maxWait time.Duration) (Result, error) {
	r, err := q.Queue(ctx, key, limit, n, maxWait)
	if err != nil || !r.Allowed {
		return r.Result, err
	}
	if err := sleep(ctx, r.Delay); err != nil {
		// The place goes back even though ctx has ended.
		_, _ = q.Unqueue(context.WithoutCancel(ctx), r)
		return Result{}, err
	}
	return r.Result, nil
}

// sleep waits d, or until ctx ends, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
