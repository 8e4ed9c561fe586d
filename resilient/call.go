package resilient

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/redlimit/redlimit"
)

// errCallerGone marks a call abandoned because the caller went away (its
// context was canceled): not the store's fault, so the breaker ignores it,
// and the caller gets its context's error.
var errCallerGone = errors.New("resilient: caller's context done")

// errNoTime marks a store call the caller left too little time for (see
// minDeadline), or none: the policy answers, and the breaker ignores it.
var errNoTime = errors.New("resilient: too little time left by the caller")

// errHeld marks a store call whose deadline ended while it waited for
// another call's charge of its state (see decideOwed). The policy answers,
// and the breaker ignores it. The call that sent the charge counts its
// status.
var errHeld = errors.New("resilient: held behind a charge of the state")

const (
	// minDeadline is the shortest store deadline, cut by the caller's,
	// whose timeout counts as a store failure. A deadline of the whole
	// Options.Timeout always counts, however short.
	minDeadline = time.Millisecond
)

// storeCall is one call to the store: AllowAll (AllowN for one admission)
// of reqs, or Peek of peek.
type storeCall struct {
	reqs  []redlimit.Request
	peek  *redlimit.Request
	probe bool      // the half-open breaker's probe: charges nothing owed
	end   time.Time // the end of the call's deadline (see decideOwed)
	// held, if not nil, is set while the call waits for a charge of its
	// state sent by another (see decideOwed); made when something is owed.
	held *atomic.Bool
	// grant, if not nil, makes the call an Admit of reqs, whose Grant is
	// sent on it (buffered) before the answer.
	grant chan<- *redlimit.Grant
}

// do makes the call c to l's store, and charges what l owes for the
// states it decides (see decideOwed), unless it is the probe.
func (c storeCall) do(ctx context.Context, l *Limiter) (redlimit.Decision, error) {
	if c.probe || l.rec.debts == nil || l.rec.debts.n.Load() == 0 {
		return c.call(ctx, l)
	}
	owed := c.reqs
	if c.peek != nil {
		owed = []redlimit.Request{*c.peek}
	}
	return l.decideOwed(ctx, c, owed)
}

// call makes the call c to l's store.
func (c storeCall) call(ctx context.Context, l *Limiter) (redlimit.Decision, error) {
	switch {
	case c.grant != nil:
		g, err := l.store.(redlimit.Refunder).Admit(ctx, c.reqs)
		if err != nil {
			return redlimit.Decision{}, err
		}
		c.grant <- g
		return g.Decision, nil
	case c.peek != nil:
		r, err := l.store.Peek(ctx, c.peek.Key, c.peek.Limit, c.peek.Cost)
		return redlimit.Decision{Allowed: r.Allowed, Results: []redlimit.Result{r}}, err
	case len(c.reqs) > 1 || c.reqs[0].Debit:
		return l.store.AllowAll(ctx, c.reqs)
	}
	r, err := l.store.AllowN(ctx, c.reqs[0].Key, c.reqs[0].Limit, c.reqs[0].Cost)
	return redlimit.Decision{Allowed: r.Allowed, Results: []redlimit.Result{r}}, err
}

// storeDeadline returns how long the store may take for a call made now by a
// caller with ctx. That is Options.Timeout, unless the caller's deadline
// comes first. Then it is the caller's remaining time less a margin, so
// the failure policy answers before that deadline. The margin is a fifth
// of the remaining time, at most Options.CallerMargin. Zero if the
// deadline has passed.
func (l *Limiter) storeDeadline(ctx context.Context, now time.Time) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return l.timeout
	}
	left := d.Sub(now)
	if left <= 0 {
		return 0
	}
	return min(l.timeout, left-min(left/5, l.margin))
}

// ask makes the call c through the circuit breaker. Its error is the
// breaker's refusal, the store's failure (both answered by the failure
// policies), or errCallerGone.
//
// A call has its deadline (see storeDeadline), and the caller gets an
// answer within it even if the client library has not answered (see
// bounded). A store that has not answered within the deadline has failed,
// whoever's context set it; a caller that went away has not made it fail.
// The one probe of the half-open breaker is judged by Options.Timeout
// instead (see probe).
func (l *Limiter) ask(ctx context.Context, c storeCall) (redlimit.Decision, error) {
	done, err := l.breaker.Allow()
	if err != nil {
		return redlimit.Decision{}, err
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		done(errCallerGone)
		return redlimit.Decision{}, errCallerGone
	}
	now := time.Now()
	deadline := l.storeDeadline(ctx, now)
	if deadline <= 0 {
		// The caller's deadline has passed: its policy answers, for a
		// caller that may still use the answer.
		err := fmt.Errorf("%w: the caller's deadline has passed", errNoTime)
		done(err)
		return redlimit.Decision{}, err
	}
	if l.breaker.State() == gobreaker.StateHalfOpen {
		// Allowed in the half-open state: this is its one probe.
		c.probe = true
		d, err := l.probe(ctx, c, deadline, done)
		l.called(now, err)
		if err == nil {
			l.kick()
		}
		return d, err
	}
	c.end = now.Add(deadline)
	if l.rec.debts != nil && l.rec.debts.n.Load() != 0 {
		c.held = new(atomic.Bool)
	}
	d, err := l.bounded(ctx, c, deadline)
	done(err)
	l.called(now, err)
	if err == nil {
		l.kick()
	}
	return d, err
}

// called reports a store call that started at start and ended with err
// to the Observer, if any, unless its caller went away.
func (l *Limiter) called(start time.Time, err error) {
	if l.obs != nil && !errors.Is(err, errCallerGone) {
		l.obs.StoreCalled(time.Since(start), err)
	}
}

// inline reports whether c may be made on its caller's goroutine. It may
// for an AllowN or Peek of a store that returns from them by their
// context's deadline (see contextBound), with nothing owed to charge
// first.
func (l *Limiter) inline(c storeCall) bool {
	return l.bound && c.grant == nil && c.held == nil &&
		(c.peek != nil || len(c.reqs) == 1 && !c.reqs[0].Debit) &&
		(l.rec.debts == nil || l.rec.debts.n.Load() == 0)
}

// contextBound is implemented by a store whose AllowN and Peek return by
// their context's deadline even if its client library does not answer, when
// ReturnsByContext says so (redisstore with batching). The Limiter then
// makes those calls on the caller's goroutine.
type contextBound interface{ ReturnsByContext() bool }

// bounded makes the call c within deadline, in a context that ends at c.end.
// It runs on the caller's goroutine when the store returns by that
// deadline (inline). Otherwise it runs on a worker, whose late answer is
// dropped.
func (l *Limiter) bounded(ctx context.Context, c storeCall, deadline time.Duration) (redlimit.Decision, error) {
	cctx, cancel := context.WithDeadline(ctx, c.end)
	defer cancel()
	var d redlimit.Decision
	var err error
	if l.inline(c) {
		d, err = c.call(cctx, l)
	} else {
		select {
		case r := <-l.workers.start(cctx, l, c, nil):
			d, err = r.d, r.err
		case <-cctx.Done():
			err = fmt.Errorf("no answer within %s: %w", deadline, context.DeadlineExceeded)
		}
	}
	if err != nil {
		return redlimit.Decision{}, l.failed(ctx, c, deadline, err)
	}
	return d, nil
}

// callersOwn reports an error of the request, not of the store: a key
// whose state the store cannot use, or a calendar window this host cannot
// place on the store's clock. No policy answers it; the breaker ignores it.
func callersOwn(err error) bool {
	return errors.Is(err, redlimit.ErrKeyState) || errors.Is(err, redlimit.ErrClockSkew)
}

// failed returns the error of the call c, made within deadline for a caller
// with ctx, that failed with err.
func (l *Limiter) failed(ctx context.Context, c storeCall, deadline time.Duration, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return errCallerGone
	case callersOwn(err):
		return err // the request's, not the store's
	case c.held != nil && c.held.Load():
		return fmt.Errorf("%w: %w: %w", errHeld, ErrStore, err)
	case deadline < minDeadline && deadline < l.timeout && errors.Is(err, context.DeadlineExceeded):
		// The caller's deadline left too little (Options.Timeout, however
		// short, is the store's to meet).
		return fmt.Errorf("%w: %w: %w", errNoTime, ErrStore, err)
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

// probe makes the call c as the half-open breaker's probe. The store gets
// probeTimeout whatever the caller's deadline. Its result goes to the
// breaker (done) when the call ends, or at probeTimeout. The caller waits
// for it within its deadline only; the failure policy answers after that.
// Some callers have deadlines shorter than the store's timeout, as Envoy
// sends them. They do not keep the breaker open against a store that
// answers within its timeout on a busy host.
func (l *Limiter) probe(ctx context.Context, c storeCall, deadline time.Duration, done func(error)) (redlimit.Decision, error) {
	var reported atomic.Bool
	report := func(err error) {
		if reported.CompareAndSwap(false, true) {
			done(err)
		}
	}
	timeout := l.probeTimeout()
	timer := time.AfterFunc(timeout, func() { report(fmt.Errorf("%w: probe: no answer within %s", ErrStore, timeout)) })
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answer := l.workers.start(pctx, l, c, func(err error) {
		cancel()
		timer.Stop()
		if err != nil {
			err = fmt.Errorf("%w: probe: %w", ErrStore, err)
		}
		report(err)
	})
	wait := time.NewTimer(deadline)
	defer wait.Stop()
	select {
	case r := <-answer:
		if r.err != nil {
			return redlimit.Decision{}, fmt.Errorf("%w: probe: %w", ErrStore, r.err)
		}
		return r.d, nil
	case <-wait.C:
		return redlimit.Decision{}, fmt.Errorf("%w: probe: no answer within the caller's %s", ErrStore, deadline)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return redlimit.Decision{}, errCallerGone
		}
		return redlimit.Decision{}, fmt.Errorf("%w: probe: no answer within the caller's deadline", ErrStore)
	}
}

// probeTimeout is the probe's deadline: the longer of Options.Timeout and
// the cool-down. The probe pays the reconnection a decision does not (a
// dial, a handshake, the scripts loaded again), which a host starved of
// CPU makes slower than a decision's timeout. No caller waits for it, and
// the breaker would stay open for the cool-down anyway.
func (l *Limiter) probeTimeout() time.Duration { return max(l.timeout, l.breaker.coolDown) }

// callerErr is the error of a caller's context that ended.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}
