package resilient

import (
	"time"

	"github.com/redlimit/redlimit"
)

// Observer is told what a [Limiter] does, for metrics and logs: set it in
// [Options.Observer]. Its methods are called synchronously, on the
// caller's goroutine or the breaker's: they must be fast, safe for
// concurrent use, and must not call the Limiter. The module
// github.com/redlimit/redlimit/prometheus has a Prometheus collector that
// is one.
type Observer interface {
	// Decided reports one limit's answer in a decision (AllowN, AllowAll
	// or Admit): whether it allowed, and the path that decided it. A
	// decision of n limits makes n reports. A call that returns an error
	// makes none; Peek and Reset make none.
	Decided(allowed bool, source redlimit.Source)
	// StoreCalled reports one call to the store for a decision or a Peek. It
	// gives how long the Limiter waited for it, and its error. The error is
	// nil when the store answered. It wraps [ErrStore] when the store failed
	// or did not answer in time. A call the open breaker refused is not made,
	// and not reported; nor is one whose caller went away. The charges the
	// reconciliation sends in the background are counted by
	// [Limiter.Reconciliation] instead.
	StoreCalled(took time.Duration, err error)
	// BreakerChanged reports a change of the circuit breaker's state
	// ("closed", "open", "half-open"). cause is the store's error that
	// opened it, nil for the other changes. It runs under the breaker's
	// lock.
	BreakerChanged(from, to string, cause error)
}

// observe reports d's results to the Observer, if any.
func (l *Limiter) observe(d redlimit.Decision) {
	if l.obs == nil {
		return
	}
	for _, r := range d.Results {
		l.obs.Decided(r.Allowed, r.Source)
	}
}
