package redlimit

import (
	"context"
	"fmt"
	"time"
)

// MaxRequests is the most requests one [Limiter.AllowAll] call may carry.
const MaxRequests = 64

// Limiter decides requests against limits. The stores in the memory and
// redisstore packages implement it; every implementation is safe for
// concurrent use and passes the conformance suite in redlimittest.
type Limiter interface {
	// AllowN reports whether a request of cost n under limit may proceed now
	// for key, and consumes n if so. A denied request consumes nothing.
	AllowN(ctx context.Context, key string, limit Limit, n int64) (Result, error)
	// AllowAll decides several limits as one: the request is allowed only if
	// every limit allows it, and a request denied by any limit consumes none
	// of them. Results come back in the order of reqs.
	AllowAll(ctx context.Context, reqs []Request) (Decision, error)
	// Peek reports what AllowN would answer for a request of cost n, without
	// consuming anything.
	Peek(ctx context.Context, key string, limit Limit, n int64) (Result, error)
	// Reset forgets what key has consumed under limit, giving it a full
	// allowance.
	Reset(ctx context.Context, key string, limit Limit) error
}

// Request is one limit of a several-limits decision: Cost units of Limit
// for Key.
type Request struct {
	Key   string
	Limit Limit
	Cost  int64
}

// Decision is the outcome of [Limiter.AllowAll].
type Decision struct {
	// Allowed reports whether every limit allowed the request; only then
	// was anything consumed.
	Allowed bool
	// Results holds one Result per request, in order. When the decision is a
	// denial, nothing was consumed and each Result is what its limit alone
	// would answer, as [Limiter.Peek] does: one that would allow shows the
	// Remaining and ResetAfter it would have after the request.
	Results []Result
}

// RetryAfter is how long until the denied request could pass, as far as the
// limits that denied it say: the longest RetryAfter among them (0 when
// Allowed).
func (d Decision) RetryAfter() time.Duration {
	var ra time.Duration
	for _, r := range d.Results {
		if !r.Allowed && r.RetryAfter > ra {
			ra = r.RetryAfter
		}
	}
	return ra
}

// Tightest returns the index of the result closest to running out: among
// denials the one with the longest RetryAfter, otherwise the one with the
// smallest Remaining relative to its Limit. It returns -1 for no results.
func (d Decision) Tightest() int {
	best := -1
	for i, r := range d.Results {
		if best < 0 || tighter(r, d.Results[best]) {
			best = i
		}
	}
	return best
}

func tighter(a, b Result) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		return a.RetryAfter > b.RetryAfter
	}
	// a.Remaining/a.Limit < b.Remaining/b.Limit, without division.
	return float64(a.Remaining)*float64(b.Limit) < float64(b.Remaining)*float64(a.Limit)
}

// ValidateRequests checks every request of a several-limits decision, and
// that no two of them share state (the same key, algorithm and period).
// Errors name the request by index and wrap the sentinel errors.
func ValidateRequests(reqs []Request) error {
	if len(reqs) == 0 {
		return ErrNoRequests
	}
	if len(reqs) > MaxRequests {
		return fmt.Errorf("%w: %d requests, at most %d", ErrInvalidLimit, len(reqs), MaxRequests)
	}
	for i, r := range reqs {
		if err := ValidateRequest(r.Key, r.Limit, r.Cost); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		for j := range i {
			q := reqs[j]
			if q.Key == r.Key && q.Limit.Algorithm == r.Limit.Algorithm && q.Limit.Period == r.Limit.Period {
				return fmt.Errorf("requests %d and %d: %w", j, i, ErrDuplicateLimit)
			}
		}
	}
	return nil
}
