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
	// of its admissions. A [Request.Debit] is counted whatever the decision,
	// and may take its key into debt. Results come back in the order of reqs.
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
	// Debit counts Cost whatever the limit says: it records work already
	// done (the tokens a model's answer used, the bytes a response sent),
	// which a denial cannot undo. A debit that does not fit is counted all
	// the same and takes the key into debt. Later requests are denied until
	// the debt has drained, as the algorithm drains any use. Its Result says
	// whether it fit (Allowed) and describes the key after it was counted.
	//
	// Without Debit, a request is an admission: it is counted only if every
	// admission and debit of its decision fits, all or nothing. The debt a
	// key can carry is bounded (see [MaxCost]).
	Debit bool
}

// Debit counts a cost of n under limit for key whatever the limit says: it
// is [Limiter.AllowAll] of one [Request] with Debit set. The Result says
// whether the cost fit (Allowed). It describes the key after it was
// counted. A debit that did not fit took the key into debt. RetryAfter is
// how long until a request of the same cost could pass.
func Debit(ctx context.Context, l Limiter, key string, limit Limit, n int64) (Result, error) {
	d, err := l.AllowAll(ctx, []Request{{Key: key, Limit: limit, Cost: n, Debit: true}})
	if err != nil {
		return Result{}, err
	}
	return d.Results[0], nil
}

// StateID returns the identity of the state r draws on: r.Limit.StateID(r.Key).
func (r Request) StateID() StateID { return r.Limit.StateID(r.Key) }

// Decision is the answer of [Limiter.AllowAll].
type Decision struct {
	// Allowed reports whether every limit allowed the request (every debit
	// fit); only then were the admissions consumed. Debits are consumed
	// either way.
	Allowed bool
	// Results holds one Result per request, in order. In a denial, no
	// admission was consumed. Each admission's Result is then what its limit
	// alone would answer, as [Limiter.Peek] does. One that would allow shows
	// the Remaining and ResetAfter it would have after the request. A store
	// that decides in parts may leave a limit [Undecided] in a denial. A
	// denial always has a positive RetryAfter. So [Decision.Tightest] and
	// [Decision.RetryAfter] never pick an undecided limit.
	Results []Result
}

// RetryAfter is how long until the denied request could pass, as far as the
// limits that denied it say: [RetryAfter] of its results (0 when Allowed).
func (d Decision) RetryAfter() time.Duration { return RetryAfter(d.Results) }

// RetryAfter returns the longest RetryAfter among the denials of results:
// how long until a request they denied could pass; 0 when none denied.
func RetryAfter(results []Result) time.Duration {
	var ra time.Duration
	for _, r := range results {
		if !r.Allowed && r.RetryAfter > ra {
			ra = r.RetryAfter
		}
	}
	return ra
}

// Tightest returns the index of the result closest to running out, as
// [Tightest] picks it; -1 for no results.
func (d Decision) Tightest() int { return Tightest(d.Results) }

// Tightest returns the index of the result closest to running out. Among
// denials, that is the one with the longest RetryAfter. Without denials,
// it is the one with the smallest Remaining relative to its Max. The
// first of equals wins. It returns
// -1 for no results. An [Undecided] result is never picked while another
// result denies: a denial always has a positive RetryAfter.
func Tightest(results []Result) int {
	best := -1
	for i, r := range results {
		if best < 0 || tighter(r, results[best]) {
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
	// a.Remaining/a.Max < b.Remaining/b.Max, without division.
	return float64(a.Remaining)*float64(b.Max) < float64(b.Remaining)*float64(a.Max)
}

// ValidateRequests checks every request of a several-limits decision, and
// that no two of them share state (the same [StateID]).
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
			if reqs[j].StateID() == r.StateID() {
				return fmt.Errorf("requests %d and %d: %w", j, i, ErrDuplicateLimit)
			}
		}
	}
	return nil
}
