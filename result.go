package redlimit

import (
	"math"
	"time"
)

// Never is the RetryAfter of a request that can never pass: its cost exceeds
// the limit's [Limit.Max].
const Never = time.Duration(math.MaxInt64)

// Result is the decision of one limit for one request.
type Result struct {
	// Allowed reports whether the request may proceed. A denial is a Result,
	// never an error.
	Allowed bool
	// Max is the most cost that can pass at once, [Limit.Max].
	Max int64
	// Remaining is how much more cost could pass right now, after this
	// request if it was allowed. Never negative.
	Remaining int64
	// RetryAfter is how long until a request of the same cost could pass,
	// if nothing else is admitted meanwhile: 0 when Allowed, [Never] when the
	// cost exceeds Max.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to a full allowance
	// (Remaining == Max) if nothing else is admitted. 0 for an idle key.
	ResetAfter time.Duration
	// Source says which path decided: the store itself (the zero value), or
	// one of the resilience paths taken when the store could not be asked.
	Source Source
}

// Denied reports whether the limit itself denied the request: r is not
// Allowed and not [Undecided]. An undecided limit was not asked, so its
// Result says nothing about its allowance.
func (r Result) Denied() bool { return !r.Allowed && r.Source != Undecided }

// Source says which path decided a [Result].
type Source uint8

const (
	// FromStore: the store decided (Redis, or the memory store).
	FromStore Source = iota
	// FromDenyCache: a denial remembered in process from an earlier
	// decision of the store, still in force.
	FromDenyCache
	// FromLocal: the store failed and the local fallback limiter decided
	// with this node's share of the limit.
	FromLocal
	// FromFailOpen: the store failed and the failure policy allowed.
	FromFailOpen
	// FromFailClosed: the store failed and the failure policy denied.
	FromFailClosed
	// Undecided: nothing decided this limit. Some stores decide a
	// request's limits in parts: the Redis store on Cluster, one part per
	// identifier. Such a store could not decide this one's part while
	// another part denied. The request is denied by that other limit. Allowed is false,
	// RetryAfter, Remaining and ResetAfter are 0, and the Result is not a
	// denial by this limit: it says nothing about its allowance.
	Undecided
)

var sourceNames = [...]string{"store", "deny_cache", "local", "fail_open", "fail_closed", "undecided"}

// String returns the source's name as metrics and logs show it, such as
// "store" or "fail_open".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown"
}
