package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of a [Policy].
const (
	DefaultMaxAttempts = 4
	DefaultMaxWait     = time.Minute
	DefaultJitter      = 0.1
)

// Policy says how often and how long a client waits when a server asks it to
// come back later. The zero value is the default: up to 4 attempts, waits of
// up to a minute, 10% jitter.
type Policy struct {
	// MaxAttempts is the most times one request is sent, the first
	// included: 1 never retries. 0 means DefaultMaxAttempts.
	MaxAttempts int
	// MaxWait is the longest wait the client accepts. When the server asks
	// for longer, the client returns the server's answer at once: a retry
	// sooner would be refused again. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// Jitter is the most that is added to each wait, at random, as a
	// fraction of it: 0.1 adds up to 10%. So clients told the same time do
	// not all come back at once. Jitter only lengthens a wait: coming back
	// before the server said is pointless. 0 means DefaultJitter; a
	// negative value adds none.
	Jitter float64
}

func (p Policy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

func (p Policy) maxWait() time.Duration {
	if p.MaxWait <= 0 {
		return DefaultMaxWait
	}
	return p.MaxWait
}

// Delay returns how long to wait when the server asks for d: d plus the
// jitter. It reports false when d is longer than MaxWait.
func (p Policy) Delay(d time.Duration) (time.Duration, bool) {
	d = max(d, 0)
	if d > p.maxWait() {
		return 0, false
	}
	j := p.Jitter
	if j == 0 {
		j = DefaultJitter
	}
	if j > 0 && d > 0 {
		// In float64, saturating at the largest Duration: d plus its
		// jitter may not fit in one.
		w := float64(d) + rand.Float64()*j*float64(d)
		if w >= math.MaxInt64 {
			return math.MaxInt64, true
		}
		d = max(d, time.Duration(w))
	}
	return d, true
}

// Wait waits before another attempt at a request that has been sent
// attempts times, when the server asked to wait d. It reports whether to
// send it again. It returns false at once when the policy says not to
// retry. That is when the request has been sent MaxAttempts times, d is
// longer than MaxWait, or ctx's deadline comes before the wait would end.
// It returns false when ctx is done while waiting.
func (p Policy) Wait(ctx context.Context, attempts int, d time.Duration) bool {
	if attempts >= p.maxAttempts() {
		return false
	}
	wait, ok := p.Delay(d)
	if !ok || !fits(ctx, wait) {
		return false
	}
	return sleep(ctx, wait)
}

// fits reports whether a wait of d ends before ctx's deadline, if it has one.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) >= d
}

// sleep waits for d, and reports false when ctx is done first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
