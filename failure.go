package redlimit

import "fmt"

// FailurePolicy says what a resilient limiter (package resilient) answers
// for a limit when its store cannot be asked. That is when Redis is down,
// slow past the deadline, or the circuit breaker is open. Stores ignore it.
type FailurePolicy uint8

const (
	// FailLocal, the zero value and default, decides with an in-process
	// limiter holding this node's share of the limit. The share is Count
	// (and Burst) divided by the number of live nodes, rounded up. It
	// starts from what the store last said of the key, when the resilient
	// limiter remembers it. That remaining allowance is divided likewise.
	FailLocal FailurePolicy = iota
	// FailOpen allows the request.
	FailOpen
	// FailClosed denies the request, with a RetryAfter of the time until the
	// store is tried again.
	FailClosed
)

var policyNames = [...]string{"local", "fail_open", "fail_closed"}

// String returns the policy's configuration name: "local", "fail_open" or
// "fail_closed".
func (p FailurePolicy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("FailurePolicy(%d)", uint8(p))
}

// ParseFailurePolicy returns the policy named s ("local", "fail_open" or
// "fail_closed").
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	for i, n := range policyNames {
		if n == s {
			return FailurePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown failure policy %q (want local, fail_open or fail_closed)", ErrInvalidLimit, s)
}

// OnFailure returns l with the failure policy p.
func (l Limit) OnFailure(p FailurePolicy) Limit { l.Failure = p; return l }
