package redlimit

import (
	"math"
	"time"
)

// Never is the RetryAfter of a request that can never pass: its cost exceeds
// the limit's [Limit.Max].
const Never = time.Duration(math.MaxInt64)

// Result is the outcome of one limit for one request.
type Result struct {
	// Allowed reports whether the request may proceed. A denial is a Result,
	// never an error.
	Allowed bool
	// Limit is the most cost that can pass at once, [Limit.Max].
	Limit int64
	// Remaining is how much more cost could pass right now, after this
	// request if it was allowed. Never negative.
	Remaining int64
	// RetryAfter is how long until a request of the same cost could pass,
	// if nothing else is admitted meanwhile: 0 when Allowed, [Never] when the
	// cost exceeds Limit.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to a full allowance
	// (Remaining == Limit) if nothing else is admitted. 0 for an idle key.
	ResetAfter time.Duration
}
