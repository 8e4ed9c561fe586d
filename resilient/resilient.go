package resilient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
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
	DefaultLastSeenSize     = 100_000
	DefaultCacheBytes       = 32 << 20
	DefaultCallerMargin     = 5 * time.Millisecond
	DefaultReconcileSize    = 100_000
	DefaultReconcileSpread  = time.Second
	DefaultSettle           = 2 * time.Second
)

// NodeCounter reports how many nodes share the limits, at least 1. The
// redisstore package's Registry is one.
type NodeCounter interface {
	Nodes() int
}

// Options configure a [Limiter]. The zero value of each field is its default.
type Options struct {
	// Timeout bounds each call to the store (default [DefaultTimeout]).
	// When the caller's context deadline comes first, the store gets the
	// caller's remaining time less a margin (a fifth of it, at most 5 ms),
	// so that the failure policy can answer before the caller's deadline.
	// A store that has not answered by then has failed: the policy answers
	// and the circuit breaker counts the failure (unless the caller left it
	// less than 1 ms, too short to judge the store by). A caller whose
	// context is canceled gets its context's error, and is not counted.
	Timeout time.Duration
	// CallerMargin is the most of a caller's remaining time kept for the
	// failure policy to answer and the answer to travel back (default
	// [DefaultCallerMargin]); a fifth of the remaining time when that is
	// less. Raise it where the process may be descheduled for longer.
	CallerMargin time.Duration
	// FailureThreshold is how many failures in a row open the circuit
	// breaker (default [DefaultFailureThreshold]).
	FailureThreshold int
	// CoolDown is how long the open breaker sends every decision to the
	// failure policies before one probe call tries the store again
	// (default [DefaultCoolDown]). A probe that succeeds closes the breaker.
	// The probe has the longer of Timeout and CoolDown whatever its
	// caller's deadline (it pays a reconnection), and its caller
	// gets the failure policy's answer if its own deadline comes first.
	CoolDown time.Duration
	// DenyCacheSize bounds how many denials are remembered in process
	// (default [DefaultDenyCacheSize]); a negative size turns the deny
	// cache off.
	DenyCacheSize int
	// CacheBytes bounds the bytes of the deny cache, and separately those
	// of the last answers LastSeenSize counts (default [DefaultCacheBytes]
	// each): an entry is counted for 128 bytes plus its key, which is client
	// data, so that long keys cannot make either hold more. An entry larger
	// than its shard's share of the bound (a sixteenth of it, for the
	// default sizes) is not kept.
	CacheBytes int
	// LastSeenSize bounds how many states (key, algorithm, period) the
	// Limiter remembers the store's last answer for (default
	// [DefaultLastSeenSize]; about 100 bytes plus the key each), so that
	// the local fallback starts from what the store last said rather than
	// from a full share; a negative size turns that off.
	LastSeenSize int
	// ReconcileSize bounds how many states (key, algorithm, period) the
	// Limiter remembers what it counted by itself for while the store
	// failed, to charge it to the store when it answers again (default
	// [DefaultReconcileSize]; about 200 bytes plus the key each, and 130
	// more while a charge of the state is in doubt, within CacheBytes); a
	// negative size turns reconciliation off. What is
	// recorded: the admissions the local fallback allowed, and every
	// debit, whatever its policy (not what fail_open allowed). When the
	// bound is reached, a new state's units are not recorded.
	ReconcileSize int
	// ReconcileSpread is the longest random wait, after the store answers
	// again, before this node charges what it owes for the states it has
	// not been asked about since (default [DefaultReconcileSpread]), so
	// that nodes coming back together spread their charges; a state asked
	// about is charged at once, before the store decides it (after its
	// first decision, for a store without an exactly-once debit). Negative:
	// no wait.
	ReconcileSpread time.Duration
	// Settle is how long after an outage this node saw (its breaker
	// opened) a decision whose limits all fail local (and carry no debit)
	// must also fit this node's local share before the store is asked
	// (default [DefaultSettle]; negative: off): Settle after the later of
	// the outage's last store failure and the breaker's close (after the
	// close, a failure is the outage's while one decision in 16 or more
	// of the recent ones met a failure; the odd failure does not extend
	// it). The nodes
	// come back apart (on Redis Cluster, up to a second or two after a
	// failover), and the store learns what another node admitted by itself only when that
	// node is back: meanwhile, without it, the store would give the nodes
	// already back what the others are still spending of their shares.
	// While it settles, a node admits no more than its share (what the
	// store last said, split between the nodes), as during the outage, so
	// the nodes together admit no more than the limit; a decision the
	// share denies is answered by it ([redlimit.FromLocal]), the others by
	// the store. Decisions through Admit (package reserve) are not held to
	// the share.
	Settle time.Duration
	// Fallback decides the limits whose policy is [redlimit.FailLocal]
	// while the store fails, in process: it is called without the caller's
	// deadline and cancellation. Default: a memory store the Limiter owns.
	Fallback redlimit.Limiter
	// Nodes counts the nodes sharing the limits, to size this node's share
	// of a limit in the fallback. Default: one node, which lets N nodes
	// admit N times a limit in an outage; New logs a warning then. Use a
	// redisstore.Registry ([Open] does), or [FixedNodes].
	Nodes NodeCounter
	// Logger receives breaker changes and failures; default slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told each decision, store call and breaker
	// change (see [Observer]). It gets the breaker's changes instead of
	// the Logger.
	Observer Observer
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
	margin   time.Duration
	coolDown time.Duration
	breaker  *gobreaker.TwoStepCircuitBreaker[struct{}]
	deny     *denyCache // nil when off
	seen     *lastSeen  // nil when off
	fallback redlimit.Limiter
	ownsFB   *memory.Store
	nodes    NodeCounter
	log      *slog.Logger
	obs      Observer              // nil when none
	lastFail atomic.Pointer[error] // the store's last failure the breaker counted
	now      func() time.Time
	workers  workers
	bound    bool // the store's AllowN and Peek return by their context's deadline (see contextBound)

	debts       *debts      // nil when reconciliation is off
	once        onceDebiter // the store, if it counts a debit once per id
	rstats      reconcileStats
	spread      time.Duration
	reconciling atomic.Bool
	settle      time.Duration // Options.Settle; 0 when off
	outage      atomic.Bool   // the breaker opened since it last closed
	mono        mono          // the measure of settleUntil, and of the caches' and debts' times
	settleUntil atomic.Int64  // the end of the settling, in l.mono's nanoseconds
	failShare   atomic.Uint32 // the share of recent decisions that met a store failure, while settling (see noteDecision)
	recMu       sync.Mutex    // guards closed and recWG.Add
	closed      bool
	recWG       sync.WaitGroup
	quit        chan struct{}  // closed by Close
	owned       []func() error // closed by Close after the Limiter, in order (see Open)
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
		timeout:  cmp.Or(opts.Timeout, DefaultTimeout),
		margin:   cmp.Or(opts.CallerMargin, DefaultCallerMargin),
		coolDown: cmp.Or(opts.CoolDown, DefaultCoolDown),
		fallback: opts.Fallback,
		nodes:    opts.Nodes,
		log:      opts.Logger,
		obs:      opts.Observer,
		now:      opts.Now,
		workers:  newWorkers(maxWorkers),
		spread:   cmp.Or(opts.ReconcileSpread, DefaultReconcileSpread),
		settle:   max(0, cmp.Or(opts.Settle, DefaultSettle)),
		quit:     make(chan struct{}),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.mono = mono{l.now()}
	// No settling until an outage: the zero value would be the epoch
	// itself, which a clock without a monotonic reading (Options.Now) may
	// read earlier than, stepped back.
	l.settleUntil.Store(math.MinInt64)
	if l.nodes == nil {
		l.nodes = FixedNodes(1)
		l.log.Warn("redlimit: resilient.Options.Nodes is not set: each node takes a whole limit when a limit fails local, so N nodes admit N times it in an outage; set Nodes to a redisstore Registry (resilient.Open does) or to resilient.FixedNodes")
	}
	if opts.DenyCacheSize >= 0 {
		l.deny = newDenyCache(cmp.Or(opts.DenyCacheSize, DefaultDenyCacheSize), cmp.Or(opts.CacheBytes, DefaultCacheBytes))
	}
	if opts.LastSeenSize >= 0 {
		l.seen = newLastSeen(cmp.Or(opts.LastSeenSize, DefaultLastSeenSize), cmp.Or(opts.CacheBytes, DefaultCacheBytes), l.mono)
	}
	if opts.ReconcileSize >= 0 {
		l.debts = newDebts(cmp.Or(opts.ReconcileSize, DefaultReconcileSize), cmp.Or(opts.CacheBytes, DefaultCacheBytes), l.mono)
	}
	l.once, _ = store.(onceDebiter)
	if b, ok := store.(contextBound); ok {
		l.bound = b.ReturnsByContext()
	}
	if l.fallback == nil {
		fb, err := memory.New()
		if err != nil {
			return nil, err
		}
		l.fallback, l.ownsFB = fb, fb
	}
	threshold := uint32(min(int64(cmp.Or(opts.FailureThreshold, DefaultFailureThreshold)), math.MaxUint32)) // gobreaker counts in 32 bits
	l.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "store",
		MaxRequests: 1,
		Timeout:     l.coolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			if err != nil { // the cause OnStateChange, called next, reports
				l.lastFail.Store(&err)
			}
			return err == nil
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			var cause error
			if p := l.lastFail.Load(); p != nil && to == gobreaker.StateOpen {
				cause = *p
			}
			if l.obs != nil {
				l.obs.BreakerChanged(from.String(), to.String(), cause)
			} else {
				l.log.Warn("redlimit: circuit breaker", "from", from.String(), "to", to.String(), "cause", cause)
			}
			switch {
			case to == gobreaker.StateOpen:
				l.outage.Store(true)
				l.failShare.Store(failOne) // failing until decisions since say otherwise
			case to == gobreaker.StateClosed && l.outage.Swap(false) && l.settle > 0:
				l.settleFrom(l.now())
			}
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, errCallerGone) || errors.Is(err, errNoTime) || errors.Is(err, errHeld) || errors.Is(err, redlimit.ErrKeyState)
		},
	})
	return l, nil
}

// Close releases the fallback store the Limiter made and the goroutines
// kept for calls to the store, after the charge being made, if any, has
// ended (within Options.Timeout); what is still owed is not charged. It
// closes the store it wraps only when [Open] opened it.
func (l *Limiter) Close() error {
	l.recMu.Lock()
	first := !l.closed
	if first {
		l.closed = true
		close(l.quit)
	}
	l.recMu.Unlock()
	l.recWG.Wait()
	l.workers.close()
	var errs []error
	if l.ownsFB != nil {
		errs = append(errs, l.ownsFB.Close())
	}
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
	var shared *redlimit.Decision // what this node's shares admitted, while it settles
	// Only with the breaker closed: while it is not, every decision goes
	// to ask, whose refusals the failure policies answer as before, and one
	// of which is the half-open breaker's probe (a share that denies
	// without asking would leave a node whose traffic has spent its shares
	// with no probe, and so on its fallback).
	settling := l.settling(start)
	if !admit && settling && l.breaker.State() == gobreaker.StateClosed {
		if d, ok := l.fromShares(ctx, reqs); ok {
			if !d.Allowed {
				l.noteDecision(false) // no call made, so no failure met
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
		if settling {
			l.noteDecision(false)
		}
		if l.seen != nil {
			for i, r := range reqs {
				l.seen.put(r.Key, r.Limit, start, d.Results[i])
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
	if errors.Is(err, redlimit.ErrKeyState) {
		// The key's own error, not the store's: no policy answers it.
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

// fromDenyCache answers reqs if the cache holds a denial for one of them.
// A decision that carries a debit is never answered from the cache: the
// debit has to be counted by the store whatever the decision.
func (l *Limiter) fromDenyCache(reqs []redlimit.Request, now time.Time) (redlimit.Decision, bool) {
	if l.deny == nil || hasDebit(reqs) {
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

// storeFailed records a store failure (or the open breaker's refusal): one
// of the outage moves the settling's end to Options.Settle from now, so
// that it ends Settle after the outage's last failure, not after the
// breaker's first close (on Redis Cluster the breaker may close on another
// master's keys while the failing master's still fail). A failure is the
// outage's while the breaker is not closed, and, while the Limiter
// settles, if failures are still frequent: at least one in failExtends of
// the recent decisions (noteDecision). The odd failure of a store that is back (a
// busy Redis's timeout) does not make the settling last, nor does a
// failure outside an outage start one.
func (l *Limiter) storeFailed() {
	if l.settle == 0 {
		return
	}
	now := l.now()
	if l.breaker.State() != gobreaker.StateClosed {
		l.settleFrom(now)
		return
	}
	if l.settling(now) && l.noteDecision(true) >= failOne/failExtends {
		l.settleFrom(now)
	}
}

// settling reports whether the Limiter settles at t. Until its first
// outage's settling, it reads no clock but t's.
func (l *Limiter) settling(t time.Time) bool {
	until := l.settleUntil.Load()
	return until != math.MinInt64 && l.mono.ns(t) < until
}

// The share of failures is an exponentially weighted average over about
// failWeight decisions, in units of 1/failOne. It counts decisions, not
// store calls: while the Limiter settles, the shares answer most decisions
// without a call, and the odd failure must stay a small share of them. It
// is set to failOne (all failing) when the breaker opens, so the failures
// of a master still down after the breaker closed extend the settling
// from the first, and only the decisions since tell them apart from the
// odd failure.
const (
	failOne     = 1 << 16
	failWeight  = 32
	failExtends = 16 // a failure extends the settling at a share of 1/16 or more
)

// noteDecision adds a decision to the share of failures, as failed if it
// met a store failure, and returns the share.
func (l *Limiter) noteDecision(failed bool) uint32 {
	for {
		old := l.failShare.Load()
		share := old - old/failWeight
		if failed {
			share += failOne / failWeight
		}
		if l.failShare.CompareAndSwap(old, share) {
			return share
		}
	}
}

// settleFrom makes the settling last at least until Options.Settle after
// now, or for ever for a Settle that would pass the largest instant
// l.mono measures. Its end only moves later: of two failures recorded at
// once, the one that read the clock first may store last.
func (l *Limiter) settleFrom(now time.Time) {
	end := int64(math.MaxInt64)
	if n := l.mono.ns(now); n <= 0 || int64(l.settle) <= math.MaxInt64-n {
		end = n + int64(l.settle) // no overflow: n <= 0 (a clock behind the start), or room left
	}
	for {
		cur := l.settleUntil.Load()
		if end <= cur || l.settleUntil.CompareAndSwap(cur, end) {
			return
		}
	}
}

// fromShares, while the Limiter settles (see Options.Settle) and other
// nodes share the limits, takes reqs from this node's shares in the
// fallback if they all fail local and carry no debit, and returns the
// shares' decision, each result from the fallback (ok false: the store
// decides alone). The store decides what the shares admit; what they
// admitted stays taken, so that with the outage's admissions this node's
// stay within its share until the settling ends.
func (l *Limiter) fromShares(ctx context.Context, reqs []redlimit.Request) (d redlimit.Decision, ok bool) {
	if l.nodes.Nodes() <= 1 {
		return d, false // no other node's admissions for the store to miss
	}
	for _, r := range reqs {
		if r.Limit.Failure != redlimit.FailLocal || r.Debit {
			return d, false
		}
	}
	ctx = policyContext(ctx)
	local := make([]redlimit.Request, len(reqs))
	for i, r := range reqs {
		local[i] = l.onShare(ctx, r)
	}
	d, err := l.fallback.AllowAll(ctx, local)
	if err != nil {
		return d, false
	}
	for i := range d.Results {
		d.Results[i].Source = redlimit.FromLocal
	}
	return d, true
}

// hasDebit reports whether one of reqs is a debit.
func hasDebit(reqs []redlimit.Request) bool {
	for _, r := range reqs {
		if r.Debit {
			return true
		}
	}
	return false
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
			d.Results[i] = redlimit.Result{Allowed: true, Limit: r.Limit.Max(), Remaining: r.Limit.Max(), Source: redlimit.FromFailOpen}
		case redlimit.FailClosed:
			d.Results[i] = redlimit.Result{Limit: r.Limit.Max(), RetryAfter: l.coolDown, Source: redlimit.FromFailClosed}
			closed = true
		default:
			local = append(local, l.onShare(ctx, r))
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
	var ld redlimit.Decision
	var err error
	if closed {
		// Denied anyway: the local admissions must not consume. Peek
		// them; count the debits.
		ld.Results = make([]redlimit.Result, len(local))
		for j, r := range local {
			if r.Debit {
				var dd redlimit.Decision
				if dd, err = l.fallback.AllowAll(ctx, []redlimit.Request{r}); err == nil {
					ld.Results[j] = dd.Results[0]
				}
			} else {
				ld.Results[j], err = l.fallback.Peek(ctx, r.Key, r.Limit, r.Cost)
			}
			if err != nil {
				break
			}
		}
	} else if fb, ok := l.fallback.(redlimit.Refunder); ok && admit {
		if rc.local, err = fb.Admit(ctx, local); err == nil {
			ld = rc.local.Decision
			if ld.Allowed {
				// Owed as AllowAll's local admissions are; a Refund
				// of the local Grant gives back what is still owed.
				for _, i := range localAt {
					if r := reqs[i]; !r.Debit {
						l.owe(r.Key, r.Limit, r.Cost)
					}
				}
				rc.owed = true
			}
		}
		d.Allowed = ld.Allowed
	} else {
		ld, err = l.fallback.AllowAll(ctx, local)
		d.Allowed = ld.Allowed
		if err == nil && ld.Allowed {
			for _, i := range localAt {
				if r := reqs[i]; !r.Debit {
					l.owe(r.Key, r.Limit, r.Cost)
				}
			}
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

// onShare returns r as the fallback decides it: under this node's share
// of its limit, the local state brought down to what the store last said.
func (l *Limiter) onShare(ctx context.Context, r redlimit.Request) redlimit.Request {
	share := l.share(r.Limit)
	l.startFrom(ctx, r.Key, r.Limit, share)
	r.Limit = share
	return r
}

// startFrom brings the local state of key under share, this node's share
// of limit, down to what the store last said (see lastSeen).
func (l *Limiter) startFrom(ctx context.Context, key string, limit, share redlimit.Limit) {
	if l.seen != nil {
		l.seen.startFrom(ctx, l.fallback, key, limit, share, int64(max(1, l.nodes.Nodes())), l.now())
	}
}

// share returns this node's share of l: Count and Burst divided by the live
// nodes, rounded up.
func (l *Limiter) share(lim redlimit.Limit) redlimit.Limit {
	n := int64(max(1, l.nodes.Nodes()))
	lim.Count = ceilDiv(lim.Count, n)
	if lim.Algorithm == redlimit.TokenBucket {
		lim.Burst = ceilDiv(lim.Burst, n)
	}
	return lim
}

// ceilDiv returns a / b rounded up, for a >= 0 and b >= 1, without the
// overflow of (a + b - 1) / b for a b near the int64's bound.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// Peek implements [redlimit.Limiter], with the same deadline, breaker and
// failure policies as AllowN, and nothing consumed on any path.
func (l *Limiter) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", err)
	}
	// A decision counts in the share of failures only while the Limiter
	// settles; before any outage, no clock is read for it.
	settling := l.settleUntil.Load() != math.MinInt64 && l.settling(l.now())
	d, err := l.ask(ctx, storeCall{peek: &redlimit.Request{Key: key, Limit: limit, Cost: n}})
	if err == nil {
		if settling {
			l.noteDecision(false)
		}
		return d.Results[0], nil
	}
	if errors.Is(err, errCallerGone) {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", callerErr(ctx))
	}
	if errors.Is(err, redlimit.ErrKeyState) {
		return redlimit.Result{}, fmt.Errorf("resilient: %w", err)
	}
	l.storeFailed()
	switch limit.Failure {
	case redlimit.FailOpen:
		return redlimit.Result{Allowed: true, Limit: limit.Max(), Remaining: limit.Max(), Source: redlimit.FromFailOpen}, nil
	case redlimit.FailClosed:
		return redlimit.Result{Limit: limit.Max(), RetryAfter: l.coolDown, Source: redlimit.FromFailClosed}, nil
	}
	share := l.share(limit)
	l.startFrom(policyContext(ctx), key, limit, share)
	r, ferr := l.fallback.Peek(policyContext(ctx), key, share, n)
	if ferr != nil {
		return redlimit.Result{}, fmt.Errorf("resilient: local fallback after %w: %w", err, ferr)
	}
	r.Source = redlimit.FromLocal
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
	if l.seen != nil {
		l.seen.forget(key, limit)
	}
	if l.debts != nil {
		// What this node owes the key is owed to the state just reset
		// no more (other nodes' debts are charged still).
		l.debts.forget(key, limit)
	}
	if err := l.fallback.Reset(policyContext(ctx), key, l.share(limit)); err != nil {
		return fmt.Errorf("resilient: reset in the fallback: %w", err)
	}
	return nil
}

// mono measures times in nanoseconds since its epoch, on the monotonic
// clock when both times have its reading, as time.Now's do: a step of the
// wall clock (NTP, a VM restored) then neither prolongs nor cuts a
// settling, a last-seen answer or a debt. A clock without the reading (a
// test's, through Options.Now) is measured on its wall times.
type mono struct{ epoch time.Time }

// ns returns t in nanoseconds since m's epoch, saturated at the bounds of
// an int64 (time.Time.Sub's).
func (m mono) ns(t time.Time) int64 { return int64(t.Sub(m.epoch)) }
