package resilient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// Defaults of [Options].
const (
	DefaultTimeout          = 50 * time.Millisecond
	DefaultFailureThreshold = 5
	DefaultCoolDown         = 250 * time.Millisecond
	DefaultDenyCacheSize    = 100_000
)

// NodeCounter reports how many nodes share the limits, at least 1. The
// redisstore package's Registry is one.
type NodeCounter interface {
	Nodes() int
}

// Options configure a [Limiter]. The zero value of each field is its default.
type Options struct {
	// Timeout bounds each call to the store (default [DefaultTimeout]); the
	// caller's context deadline applies too, whichever comes first. A call
	// past its deadline counts as a failure.
	Timeout time.Duration
	// FailureThreshold is how many failures in a row open the circuit
	// breaker (default [DefaultFailureThreshold]).
	FailureThreshold int
	// CoolDown is how long the open breaker sends every decision to the
	// failure policies before one probe call tries the store again
	// (default [DefaultCoolDown]). A probe that succeeds closes the breaker.
	CoolDown time.Duration
	// DenyCacheSize bounds how many denials are remembered in process
	// (default [DefaultDenyCacheSize]); a negative size turns the deny
	// cache off.
	DenyCacheSize int
	// Fallback decides the limits whose policy is [redlimit.FailLocal]
	// while the store fails. Default: a memory store the Limiter owns.
	Fallback redlimit.Limiter
	// Nodes counts the nodes sharing the limits, to size this node's share
	// of a limit in the fallback. Default: one node.
	Nodes NodeCounter
	// Logger receives breaker changes and failures; default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the deny cache; default time.Now.
	Now func() time.Time
}

// Limiter wraps a store (typically Redis) so that its failures neither fail
// the caller nor let clients flood: every call has a deadline, a circuit
// breaker stops calling a store that keeps failing, each limit's
// [redlimit.FailurePolicy] answers while the store cannot, and an exact deny
// cache answers repeated requests of a key that has nothing left without
// asking the store. Every Result says which path decided it.
//
// A Limiter is safe for concurrent use. Close it to release the fallback it
// made.
type Limiter struct {
	store    redlimit.Limiter
	timeout  time.Duration
	coolDown time.Duration
	breaker  *gobreaker.CircuitBreaker[redlimit.Decision]
	deny     *denyCache // nil when off
	fallback redlimit.Limiter
	ownsFB   *memory.Store
	nodes    NodeCounter
	log      *slog.Logger
	now      func() time.Time
	workers  workers
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
	if opts.Timeout < 0 || opts.FailureThreshold < 0 || opts.CoolDown < 0 {
		return nil, fmt.Errorf("resilient: negative Timeout, FailureThreshold or CoolDown")
	}
	l := &Limiter{
		store:    store,
		timeout:  cmp(opts.Timeout, DefaultTimeout),
		coolDown: cmp(opts.CoolDown, DefaultCoolDown),
		fallback: opts.Fallback,
		nodes:    opts.Nodes,
		log:      opts.Logger,
		now:      opts.Now,
		workers:  newWorkers(maxWorkers),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.nodes == nil {
		l.nodes = oneNode{}
	}
	if opts.DenyCacheSize >= 0 {
		l.deny = newDenyCache(cmp(opts.DenyCacheSize, DefaultDenyCacheSize))
	}
	if l.fallback == nil {
		fb, err := memory.New()
		if err != nil {
			return nil, err
		}
		l.fallback, l.ownsFB = fb, fb
	}
	threshold := uint32(cmp(opts.FailureThreshold, DefaultFailureThreshold))
	l.breaker = gobreaker.NewCircuitBreaker[redlimit.Decision](gobreaker.Settings{
		Name:        "store",
		MaxRequests: 1,
		Timeout:     l.coolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			l.log.Warn("redlimit: circuit breaker", "from", from.String(), "to", to.String())
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errCallerGone) },
	})
	return l, nil
}

func cmp[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

type oneNode struct{}

func (oneNode) Nodes() int { return 1 }

// Close releases the fallback store the Limiter made and the goroutines
// kept for calls to the store. It does not close the store it wraps.
func (l *Limiter) Close() error {
	l.workers.close()
	if l.ownsFB != nil {
		return l.ownsFB.Close()
	}
	return nil
}

// BreakerState returns the circuit breaker's state: "closed" (the store is
// called), "open" (it is not) or "half-open" (one probe is).
func (l *Limiter) BreakerState() string { return l.breaker.State().String() }

// errCallerGone marks a call abandoned because the caller's own context
// ended: not the store's fault, so the breaker ignores it.
var errCallerGone = errors.New("resilient: caller's context done")

// callerGone reports whether the caller's context has ended, or reached its
// deadline: a client library may time out on that deadline a moment before
// the context's own timer marks it done.
func callerGone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// callerFirst reports whether the caller's deadline comes no later than ours.
func callerFirst(ctx context.Context, ours time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && !d.After(ours)
}

// callerErr is the error of a caller's context that callerGone reported.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

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
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("resilient: %w", err)
	}
	start := l.now()
	if d, ok := l.fromDenyCache(reqs, start); ok {
		return d, nil
	}
	d, err := l.breaker.Execute(func() (redlimit.Decision, error) { return l.call(ctx, reqs) })
	if err == nil {
		if l.deny != nil && !d.Allowed {
			for i, r := range reqs {
				l.deny.put(r.Key, r.Limit, r.Cost, start, d.Results[i])
			}
		}
		return d, nil
	}
	if errors.Is(err, errCallerGone) {
		return redlimit.Decision{}, fmt.Errorf("resilient: %w", callerErr(ctx))
	}
	return l.onFailure(ctx, reqs, err)
}

// fromDenyCache answers reqs if the cache holds a denial for one of them.
func (l *Limiter) fromDenyCache(reqs []redlimit.Request, now time.Time) (redlimit.Decision, bool) {
	if l.deny == nil {
		return redlimit.Decision{}, false
	}
	for i, r := range reqs {
		res, ok := l.deny.get(r.Key, r.Limit, r.Cost, now)
		if !ok {
			continue
		}
		d := redlimit.Decision{Results: make([]redlimit.Result, len(reqs))}
		for j, q := range reqs {
			// The other limits were not asked: shown as allowing, with
			// their whole allowance, which is not known here.
			d.Results[j] = redlimit.Result{Allowed: true, Limit: q.Limit.Max(), Remaining: q.Limit.Max(), Source: redlimit.FromDenyCache}
		}
		d.Results[i] = res
		return d, true
	}
	return redlimit.Decision{}, false
}

// call asks the store to decide reqs.
func (l *Limiter) call(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	return l.bounded(ctx, storeCall{reqs: reqs})
}

// storeCall is one call to the store: AllowAll (AllowN for one request) of
// reqs, or Peek of peek.
type storeCall struct {
	reqs []redlimit.Request
	peek *redlimit.Request
}

// do makes the call c to l's store.
func (c storeCall) do(ctx context.Context, l *Limiter) (redlimit.Decision, error) {
	switch {
	case c.peek != nil:
		r, err := l.store.Peek(ctx, c.peek.Key, c.peek.Limit, c.peek.Cost)
		return redlimit.Decision{Allowed: r.Allowed, Results: []redlimit.Result{r}}, err
	case len(c.reqs) > 1:
		return l.store.AllowAll(ctx, c.reqs)
	}
	r, err := l.store.AllowN(ctx, c.reqs[0].Key, c.reqs[0].Limit, c.reqs[0].Cost)
	return redlimit.Decision{Allowed: r.Allowed, Results: []redlimit.Result{r}}, err
}

// bounded makes the call c with the deadline, giving up at the deadline
// even if the client does not: the late answer is then dropped by the
// worker that made the call (see workers).
func (l *Limiter) bounded(ctx context.Context, c storeCall) (redlimit.Decision, error) {
	if callerGone(ctx) {
		return redlimit.Decision{}, errCallerGone
	}
	ours := time.Now().Add(l.timeout)
	cctx := ctx
	if d, ok := ctx.Deadline(); !ok || d.After(ours) || ctx.Done() == nil {
		// Our deadline comes first: a context of its own. (When the
		// caller's comes first, its context already ends the call, with
		// no timer of ours.)
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, ours)
		defer cancel()
	}
	j := l.workers.start(cctx, l, c)
	select {
	case <-j.done:
		d, err := j.d, j.err
		l.workers.release(j)
		switch {
		case err == nil:
			return d, nil
		case callerGone(ctx), errors.Is(err, context.DeadlineExceeded) && callerFirst(ctx, ours):
			// The caller's deadline ended the call, whoever noticed first.
			return redlimit.Decision{}, errCallerGone
		default:
			return redlimit.Decision{}, fmt.Errorf("%w: %w", ErrStore, err)
		}
	case <-cctx.Done():
		// The job is left to its worker, which drops the late answer.
		if callerGone(ctx) {
			return redlimit.Decision{}, errCallerGone
		}
		return redlimit.Decision{}, fmt.Errorf("%w: no answer within %s", ErrStore, l.timeout)
	}
}

// onFailure decides reqs by their failure policies.
func (l *Limiter) onFailure(ctx context.Context, reqs []redlimit.Request, cause error) (redlimit.Decision, error) {
	if !errors.Is(cause, gobreaker.ErrOpenState) && !errors.Is(cause, gobreaker.ErrTooManyRequests) {
		l.log.Debug("redlimit: store failed, deciding by failure policy", "err", cause)
	}
	d := redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs))}
	closed := false
	var local []redlimit.Request
	var localAt []int
	for i, r := range reqs {
		switch r.Limit.Failure {
		case redlimit.FailOpen:
			d.Results[i] = redlimit.Result{Allowed: true, Limit: r.Limit.Max(), Remaining: r.Limit.Max(), Source: redlimit.FromFailOpen}
		case redlimit.FailClosed:
			d.Results[i] = redlimit.Result{Limit: r.Limit.Max(), RetryAfter: l.coolDown, Source: redlimit.FromFailClosed}
			closed = true
		default:
			local = append(local, redlimit.Request{Key: r.Key, Limit: l.share(r.Limit), Cost: r.Cost})
			localAt = append(localAt, i)
		}
	}
	if closed {
		d.Allowed = false
	}
	if len(local) == 0 {
		return d, nil
	}
	var ld redlimit.Decision
	var err error
	if closed {
		// Denied anyway: the local limits must not consume. Peek them.
		ld.Results = make([]redlimit.Result, len(local))
		for j, r := range local {
			if ld.Results[j], err = l.fallback.Peek(ctx, r.Key, r.Limit, r.Cost); err != nil {
				break
			}
		}
	} else {
		ld, err = l.fallback.AllowAll(ctx, local)
		d.Allowed = ld.Allowed
	}
	if err != nil {
		return redlimit.Decision{}, fmt.Errorf("resilient: local fallback after %w: %w", cause, err)
	}
	for j, i := range localAt {
		r := ld.Results[j]
		r.Source = redlimit.FromLocal
		d.Results[i] = r
	}
	return d, nil
}

// share returns this node's share of l: Count and Burst divided by the live
// nodes, rounded up.
func (l *Limiter) share(lim redlimit.Limit) redlimit.Limit {
	n := int64(max(1, l.nodes.Nodes()))
	lim.Count = (lim.Count + n - 1) / n
	if lim.Algorithm == redlimit.TokenBucket {
		lim.Burst = (lim.Burst + n - 1) / n
	}
	return lim
}

// Peek implements [redlimit.Limiter], with the same deadline, breaker and
// failure policies as AllowN, and nothing consumed on any path.
func (l *Limiter) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", err)
	}
	d, err := l.breaker.Execute(func() (redlimit.Decision, error) {
		return l.bounded(ctx, storeCall{peek: &redlimit.Request{Key: key, Limit: limit, Cost: n}})
	})
	if err == nil {
		return d.Results[0], nil
	}
	if errors.Is(err, errCallerGone) {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", callerErr(ctx))
	}
	switch limit.Failure {
	case redlimit.FailOpen:
		return redlimit.Result{Allowed: true, Limit: limit.Max(), Remaining: limit.Max(), Source: redlimit.FromFailOpen}, nil
	case redlimit.FailClosed:
		return redlimit.Result{Limit: limit.Max(), RetryAfter: l.coolDown, Source: redlimit.FromFailClosed}, nil
	}
	r, ferr := l.fallback.Peek(ctx, key, l.share(limit), n)
	if ferr != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: local fallback after %w: %w", err, ferr)
	}
	r.Source = redlimit.FromLocal
	return r, nil
}

// Reset implements [redlimit.Limiter]: it resets the key in the store, the
// fallback and the deny cache. A store failure is returned: there is no
// policy for a reset.
func (l *Limiter) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("resilient: %w", err)
	}
	if l.deny != nil {
		l.deny.forget(key, limit)
	}
	if err := l.fallback.Reset(ctx, key, l.share(limit)); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.store.Reset(cctx, key, limit); err != nil {
		return fmt.Errorf("%w: reset: %w", ErrStore, err)
	}
	return nil
}
