package resilient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/redlimit/redlimit"
)

// BreakerOptions configure the circuit breaker, which stops calling a
// store that keeps failing; each limit's [redlimit.FailurePolicy] answers
// meanwhile. The zero value of each field is its default.
type BreakerOptions struct {
	// FailureThreshold is how many failures in a row open the breaker
	// (default [DefaultFailureThreshold]).
	FailureThreshold int
	// CoolDown is how long the open breaker sends every decision to the
	// failure policies before one probe call tries the store again
	// (default [DefaultCoolDown]). A probe that succeeds closes it. The
	// probe has the longer of Timeout and CoolDown whatever its caller's
	// deadline (it pays a reconnection). Its caller gets the failure
	// policy's answer if its own deadline comes first.
	CoolDown time.Duration
}

// breaker is the circuit breaker in front of the store.
type breaker struct {
	*gobreaker.TwoStepCircuitBreaker[struct{}]
	coolDown time.Duration
	lastFail atomic.Pointer[error] // the store's last failure it counted
}

// newBreaker returns a breaker that calls changed on each change of state,
// with the store's error that opened it (nil for the other changes).
func newBreaker(o BreakerOptions, changed func(from, to gobreaker.State, cause error)) *breaker {
	b := &breaker{coolDown: cmp.Or(o.CoolDown, DefaultCoolDown)}
	threshold := uint32(min(int64(cmp.Or(o.FailureThreshold, DefaultFailureThreshold)), math.MaxUint32)) // gobreaker counts in 32 bits
	b.TwoStepCircuitBreaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "store",
		MaxRequests: 1,
		Timeout:     b.coolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			if err != nil { // the cause OnStateChange, called next, reports
				b.lastFail.Store(&err)
			}
			return err == nil
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			var cause error
			if p := b.lastFail.Load(); p != nil && to == gobreaker.StateOpen {
				cause = *p
			}
			changed(from, to, cause)
		},
		// Not the store's failures: the caller's, or the key's.
		IsExcluded: func(err error) bool {
			return errors.Is(err, errCallerGone) || errors.Is(err, errNoTime) || errors.Is(err, errHeld) || callersOwn(err)
		},
	})
	return b
}

// closed reports whether the breaker is closed.
func (b *breaker) closed() bool { return b.State() == gobreaker.StateClosed }

// breakerChanged reports a change of the breaker's state, and starts or
// ends an outage of the fallback.
func (l *Limiter) breakerChanged(from, to gobreaker.State, cause error) {
	if l.obs != nil {
		l.obs.BreakerChanged(from.String(), to.String(), cause)
	} else {
		l.log.Warn("redlimit: circuit breaker", "from", from.String(), "to", to.String(), "cause", cause)
	}
	switch to {
	case gobreaker.StateOpen:
		l.local.breakerOpened()
	case gobreaker.StateClosed:
		l.local.breakerClosed(l.now())
	}
}

// failOpen and failClosed are the answers of those policies to a limit.
func failOpen(limit redlimit.Limit) redlimit.Result {
	return redlimit.Result{Allowed: true, Max: limit.Max(), Remaining: limit.Max(), Source: redlimit.FromFailOpen}
}

func (b *breaker) failClosed(limit redlimit.Limit) redlimit.Result {
	return redlimit.Result{Max: limit.Max(), RetryAfter: b.coolDown, Source: redlimit.FromFailClosed}
}

// onFailure decides reqs by their failure policies.
func (l *Limiter) onFailure(ctx context.Context, reqs []redlimit.Request, cause error, admit bool) (redlimit.Decision, *receipt, error) {
	if !errors.Is(cause, gobreaker.ErrOpenState) && !errors.Is(cause, gobreaker.ErrTooManyRequests) {
		l.log.Debug("redlimit: store failed, deciding by failure policy", "err", cause)
	}
	ctx = policyContext(ctx)
	d := redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs))}
	closed := false
	var local []redlimit.Request
	var localAt []int
	for i, r := range reqs {
		if r.Debit {
			l.owe(r.Key, r.Limit, r.Cost)
		}
		switch r.Limit.Failure {
		case redlimit.FailOpen:
			d.Results[i] = failOpen(r.Limit)
		case redlimit.FailClosed:
			d.Results[i] = l.breaker.failClosed(r.Limit)
			closed = true
		default:
			local = append(local, l.local.onShare(ctx, r, l.now()))
			localAt = append(localAt, i)
		}
	}
	if closed {
		d.Allowed = false
	}
	rc := &receipt{localAt: localAt}
	if len(local) == 0 {
		return d, rc, nil
	}
	// The local admissions are owed to the store; debits were owed above.
	oweAdmitted := func() {
		for _, i := range localAt {
			if r := reqs[i]; !r.Debit {
				l.owe(r.Key, r.Limit, r.Cost)
			}
		}
	}
	var ld redlimit.Decision
	var err error
	if closed {
		// Denied anyway: the local admissions must not consume. Peek
		// them; count the debits.
		ld.Results = make([]redlimit.Result, len(local))
		for j, r := range local {
			if r.Debit {
				var dd redlimit.Decision
				if dd, err = l.local.lim.AllowAll(ctx, []redlimit.Request{r}); err == nil {
					ld.Results[j] = dd.Results[0]
				}
			} else {
				ld.Results[j], err = l.local.lim.Peek(ctx, r.Key, r.Limit, r.Cost)
			}
			if err != nil {
				break
			}
		}
	} else if fb, ok := l.local.lim.(redlimit.Refunder); ok && admit {
		if rc.local, err = fb.Admit(ctx, local); err == nil {
			ld = rc.local.Decision
			if ld.Allowed {
				// Owed as AllowAll's local admissions are; a Refund
				// of the local Grant gives back what is still owed.
				oweAdmitted()
				rc.owed = true
			}
		}
		d.Allowed = ld.Allowed
	} else {
		ld, err = l.local.lim.AllowAll(ctx, local)
		d.Allowed = ld.Allowed
		if err == nil && ld.Allowed {
			oweAdmitted()
		}
	}
	if err != nil {
		return redlimit.Decision{}, nil, fmt.Errorf("resilient: local fallback after %w: %w", cause, err)
	}
	for j, i := range localAt {
		r := ld.Results[j]
		r.Source = redlimit.FromLocal
		d.Results[i] = r
	}
	return d, rc, nil
}

// policyContext returns ctx for the failure policy's fallback: without its
// deadline or cancellation, which may come while the fallback decides: the
// policy answers once the store has failed.
func policyContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
