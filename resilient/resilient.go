package resilient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlimit/redlimit"
)

// Defaults of [Options].
const (
	DefaultTimeout          = 50 * time.Millisecond
	DefaultFailureThreshold = 5
	DefaultCoolDown         = 250 * time.Millisecond
	DefaultDenyCacheSize    = 100_000
	DefaultLastSeenSize     = 100_000
	DefaultCacheBytes       = 32 << 20
	DefaultCallerMargin     = 5 * time.Millisecond
	DefaultReconcileSize    = 100_000
	DefaultReconcileSpread  = time.Second
	DefaultRejoin           = 2 * time.Second
)

// NodeCounter reports how many nodes share the limits, at least 1. The
// redisstore package's Registry is one.
type NodeCounter interface {
	Nodes() int
}

// Options configure a [Limiter]. The zero value of each field is its default.
type Options struct {
	// Timeout bounds each call to the store (default [DefaultTimeout]).
	// When the caller's deadline comes first, the store gets the caller's
	// remaining time less a margin (see CallerMargin), so that the failure
	// policy can answer before that deadline. A store that has not
	// answered by then has failed: the policy answers and the breaker
	// counts it, unless the caller left it less than 1 ms. A caller whose
	// context is canceled gets its context's error, and is not counted.
	Timeout time.Duration
	// CallerMargin is the most of a caller's remaining time kept for the
	// failure policy to answer (default [DefaultCallerMargin]); a fifth of
	// the remaining time when that is less. Raise it where the process
	// may be descheduled for longer.
	CallerMargin time.Duration
	// Nodes counts the nodes sharing the limits, to size this node's share
	// of a limit in the fallback. Default: one node, which lets N nodes
	// admit N times a limit in an outage; New logs a warning then. Use a
	// redisstore.Registry ([Open] does), or [FixedNodes].
	Nodes NodeCounter

	Breaker   BreakerOptions
	DenyCache DenyCacheOptions
	Fallback  FallbackOptions
	Reconcile ReconcileOptions

	// Logger receives breaker changes and failures; default slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told each decision, store call and breaker
	// change (see [Observer]). It gets the breaker's changes instead of
	// the Logger.
	Observer Observer
	// Now is the clock of the caches and the rejoin; default time.Now.
	Now func() time.Time
}

// Limiter wraps a store (typically Redis) so that its failures neither fail
// the caller nor let clients flood. Every call has a deadline. A circuit
// breaker stops calling a store that keeps failing. Each limit's
// [redlimit.FailurePolicy] answers while the store cannot. An exact deny
// cache answers repeated requests of a key that has nothing left, without
// asking the store. Every Result says which path decided it.
//
// A Limiter is safe for concurrent use. Close it to release the fallback it
// made.
type Limiter struct {
	store   redlimit.Limiter
	timeout time.Duration
	margin  time.Duration
	bound   bool // the store's AllowN and Peek return by their context's deadline (see contextBound)
	workers workers

	breaker *breaker    // breaker.go
	deny    *denyCache  // denycache.go; nil when off
	local   *fallback   // fallback.go
	rec     *reconciler // reconcile.go

	log   *slog.Logger
	obs   Observer // nil when none
	now   func() time.Time
	mono  mono           // the measure of the rejoin's, the caches' and the debts' times
	owned []func() error // closed by Close after the Limiter, in order (see Open)
}

var _ redlimit.Limiter = (*Limiter)(nil)

// ErrStore wraps the store's error when a call had to fall back, for logs;
// callers see it only from Reset, which has no fallback.
var ErrStore = errors.New("resilient: store failed")

// New returns a Limiter in front of store.
func New(store redlimit.Limiter, opts Options) (*Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("resilient: nil store")
	}
	if opts.Timeout < 0 || opts.Breaker.FailureThreshold < 0 || opts.Breaker.CoolDown < 0 {
		return nil, fmt.Errorf("resilient: negative Timeout, Breaker.FailureThreshold or Breaker.CoolDown")
	}
	l := &Limiter{
		store:   store,
		timeout: cmp.Or(opts.Timeout, DefaultTimeout),
		margin:  cmp.Or(opts.CallerMargin, DefaultCallerMargin),
		log:     cmp.Or(opts.Logger, slog.Default()),
		obs:     opts.Observer,
		now:     opts.Now,
		workers: newWorkers(maxWorkers),
		rec:     &reconciler{spread: cmp.Or(opts.Reconcile.Spread, DefaultReconcileSpread), quit: make(chan struct{}), leasesBusy: make(chan struct{}, 1)},
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.mono = mono{l.now()}
	nodes := opts.Nodes
	if nodes == nil {
		nodes = FixedNodes(1)
		l.log.Warn("redlimit: resilient.Options.Nodes is not set: each node takes a whole limit when a limit fails local, so N nodes admit N times it in an outage; set Nodes to a redisstore Registry (resilient.Open does) or to resilient.FixedNodes")
	}
	if opts.DenyCache.Size >= 0 {
		l.deny = newDenyCache(cmp.Or(opts.DenyCache.Size, DefaultDenyCacheSize), cmp.Or(opts.DenyCache.Bytes, DefaultCacheBytes))
	}
	if opts.Reconcile.Size >= 0 {
		l.rec.debts = newDebts(cmp.Or(opts.Reconcile.Size, DefaultReconcileSize), cmp.Or(opts.Reconcile.Bytes, DefaultCacheBytes), l.mono)
	}
	l.rec.once, _ = store.(onceDebiter)
	if b, ok := store.(contextBound); ok {
		l.bound = b.ReturnsByContext()
	}
	var err error
	if l.local, err = newFallback(opts.Fallback, nodes, l.mono); err != nil {
		return nil, err
	}
	l.breaker = newBreaker(opts.Breaker, l.breakerChanged)
	return l, nil
}

// Close releases the fallback store the Limiter made and the goroutines
// kept for calls to the store. It first waits for the charge being made,
// if any, within Options.Timeout. What is still owed is not charged. It
// closes the store it wraps only when [Open] opened it.
func (l *Limiter) Close() error {
	l.rec.mu.Lock()
	first := !l.rec.closed
	if first {
		l.rec.closed = true
		close(l.rec.quit)
	}
	l.rec.mu.Unlock()
	l.rec.wg.Wait()
	l.workers.close()
	errs := []error{l.local.close()}
	if first {
		for _, c := range l.owned {
			errs = append(errs, c())
		}
	}
	return errors.Join(errs...)
}

// BreakerState returns the circuit breaker's state: "closed" (the store is
// called), "open" (it is not) or "half-open" (one probe is).
func (l *Limiter) BreakerState() string { return l.breaker.State().String() }

// AllowN implements [redlimit.Limiter].
func (l *Limiter) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	d, err := l.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: limit, Cost: n}})
	if err != nil {
		return redlimit.Result{}, err
	}
	return d.Results[0], nil
}

// Allow is AllowN with a cost of 1.
func (l *Limiter) Allow(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowAll implements [redlimit.Limiter]. It returns an error only for bad
// input or when the caller's own context ends; a store failure is answered
// by the failure policies.
func (l *Limiter) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	d, _, err := l.allowAll(ctx, reqs, false)
	return d, err
}

// allowAll is AllowAll; with admit, it admits through the store's and the
// fallback's Admit, and returns what a Refund needs. It reports the
// decision to the Observer.
func (l *Limiter) allowAll(ctx context.Context, reqs []redlimit.Request, admit bool) (redlimit.Decision, *receipt, error) {
	d, rc, err := l.decide(ctx, reqs, admit)
	if err == nil {
		l.observe(d)
	}
	return d, rc, err
}

// decide is allowAll without the report.
func (l *Limiter) decide(ctx context.Context, reqs []redlimit.Request, admit bool) (redlimit.Decision, *receipt, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, nil, fmt.Errorf("resilient: %w", err)
	}
	start := l.now()
	if d, ok := l.fromDenyCache(reqs, start); ok {
		return d, &receipt{}, nil
	}
	var shared *redlimit.Decision // what this node's shares admitted, while it rejoins
	// Only with the breaker closed. Otherwise every decision goes to ask.
	// The failure policies answer its refusals as before. One of them is
	// the half-open breaker's probe. A share that denies without asking
	// would leave a node that spent its shares with no probe. That node
	// would stay on its fallback.
	rejoining := l.local.rejoining(start)
	if !admit && rejoining && l.breaker.closed() {
		if d, ok := l.local.fromShares(ctx, reqs, start); ok {
			if !d.Allowed {
				l.local.noteDecision(false) // no call made, so no failure met
				return d, &receipt{}, nil
			}
			shared = &d
		}
	}
	c := storeCall{reqs: reqs}
	var grant chan *redlimit.Grant
	if admit {
		grant = make(chan *redlimit.Grant, 1)
		c.grant = grant
	}
	d, err := l.ask(ctx, c)
	if err == nil {
		if rejoining {
			l.local.noteDecision(false)
		}
		if l.local.seen != nil {
			for i, r := range reqs {
				l.local.seen.put(r.Key, r.Limit, start, d.Results[i])
			}
		}
		if l.deny != nil && !d.Allowed {
			for i, r := range reqs {
				l.deny.put(r.Key, r.Limit, r.Cost, start, d.Results[i])
			}
		}
		if !admit {
			return d, nil, nil // no Refund will need a receipt
		}
		return d, &receipt{store: <-grant}, nil // the Grant was sent before the answer
	}
	if errors.Is(err, errCallerGone) {
		return redlimit.Decision{}, nil, fmt.Errorf("resilient: %w", callerErr(ctx))
	}
	if callersOwn(err) {
		// The request's own error, not the store's: no policy answers it.
		return redlimit.Decision{}, nil, fmt.Errorf("resilient: %w", err)
	}
	l.storeFailed()
	if shared != nil {
		// The shares have admitted reqs already: their admission stands,
		// as the fallback's, and is owed to the store.
		for _, r := range reqs {
			l.owe(r.Key, r.Limit, r.Cost)
		}
		return *shared, &receipt{}, nil
	}
	return l.onFailure(ctx, reqs, err, admit)
}

// storeFailed records a store failure (or the open breaker's refusal)
// for the rejoin (see fallback.storeFailed).
func (l *Limiter) storeFailed() { l.local.storeFailed(l.now(), l.breaker.closed()) }

// hasDebit reports whether one of reqs is a debit.
func hasDebit(reqs []redlimit.Request) bool {
	for _, r := range reqs {
		if r.Debit {
			return true
		}
	}
	return false
}

// Peek implements [redlimit.Limiter], with the same deadline, breaker and
// failure policies as AllowN, and nothing consumed on any path.
func (l *Limiter) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", err)
	}
	// A decision counts in the share of failures only while the Limiter
	// rejoins; before any outage, no clock is read for it.
	rejoining := l.local.everRejoined() && l.local.rejoining(l.now())
	d, err := l.ask(ctx, storeCall{peek: &redlimit.Request{Key: key, Limit: limit, Cost: n}})
	if err == nil {
		if rejoining {
			l.local.noteDecision(false)
		}
		return d.Results[0], nil
	}
	if errors.Is(err, errCallerGone) {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", callerErr(ctx))
	}
	if callersOwn(err) {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", err)
	}
	l.storeFailed()
	switch limit.Failure {
	case redlimit.FailOpen:
		return failOpen(limit), nil
	case redlimit.FailClosed:
		return l.breaker.failClosed(limit), nil
	}
	r, ferr := l.local.peek(policyContext(ctx), key, limit, n, l.now())
	if ferr != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: local fallback after %w: %w", err, ferr)
	}
	return r, nil
}

// Reset implements [redlimit.Limiter]: it resets the key in the store,
// then in the fallback and the caches, and drops what this node owes the
// store for it (see Reconciliation). A store failure is returned, and
// leaves this node's state as it was: there is no policy for a reset.
func (l *Limiter) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("resilient: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.store.Reset(cctx, key, limit); err != nil {
		return fmt.Errorf("%w: reset: %w", ErrStore, err)
	}
	if l.deny != nil {
		l.deny.forget(key, limit, l.now())
	}
	if l.rec.debts != nil {
		// What this node owes the key is owed to the state just reset
		// no more (other nodes' debts are charged still).
		l.rec.debts.forget(key, limit)
	}
	if err := l.local.reset(policyContext(ctx), key, limit); err != nil {
		return fmt.Errorf("resilient: reset in the fallback: %w", err)
	}
	return nil
}

// mono measures times in nanoseconds since its epoch. It uses the monotonic
// clock when both times have its reading, as time.Now's do. A step of the
// wall clock (NTP, a VM restored) then neither prolongs nor cuts a
// rejoining, a last-seen answer or a debt. A clock without the reading (a
// test's, through Options.Now) is measured on its wall times.
type mono struct{ epoch time.Time }

// ns returns t in nanoseconds since m's epoch, saturated at the bounds of
// an int64 (time.Time.Sub's).
func (m mono) ns(t time.Time) int64 { return int64(t.Sub(m.epoch)) }
