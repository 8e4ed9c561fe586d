package reserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

// Defaults of [Options].
const (
	DefaultTimeout     = 5 * time.Minute
	DefaultMaxPending  = 100_000
	DefaultCallTimeout = 5 * time.Second
)

// Sentinel errors; test them with [errors.Is].
var (
	// ErrSettled reports a Settle of a reservation already settled or
	// released.
	ErrSettled = errors.New("reserve: reservation already settled")
	// ErrExpired reports a Settle of a reservation the Ledger released at
	// its timeout: the real cost was debited in full.
	ErrExpired = errors.New("reserve: reservation expired before it was settled")
	// ErrTooManyPending reports a Reserve refused because Options.MaxPending
	// reservations are pending.
	ErrTooManyPending = errors.New("reserve: too many pending reservations")
	// ErrDenied reports a Settle of a reservation that was denied: it
	// consumed nothing, and there is nothing to settle.
	ErrDenied = errors.New("reserve: reservation was denied")
	// ErrNotDebited reports a Settle whose debit of the cost above the
	// estimate the store failed to count, or may have failed to. The error
	// names the requests: a Redis Cluster node failed. That work is not
	// counted. The reservation is settled all the same.
	ErrNotDebited = errors.New("reserve: cost above the estimate not debited")
	// ErrCostClamped reports a Settle of a real cost above
	// [redlimit.MaxCost]: MaxCost was counted, the most one request can
	// count, and the reservation is settled.
	ErrCostClamped = errors.New("reserve: real cost above redlimit.MaxCost, counted as MaxCost")
)

// Options configure a [Ledger]. The zero value of each field is its default.
type Options struct {
	// Timeout is how long a reservation may stay unsettled before the
	// Ledger releases it (default [DefaultTimeout]).
	Timeout time.Duration
	// MaxPending bounds the reservations pending at once (default
	// [DefaultMaxPending]).
	MaxPending int
	// CallTimeout bounds each call to the store made by Settle, Release and
	// the release of an expired reservation (default [DefaultCallTimeout]).
	CallTimeout time.Duration
	// Now is the clock of the timeouts (default time.Now). The Ledger
	// checks for expired reservations when a timer it sets by this clock
	// fires.
	Now func() time.Time
	// OnExpire, if set, is called after the Ledger released a reservation
	// at its timeout, for metrics or logs. It gets the error of the
	// release: nil if it gave the estimate back. A Settle or Release may
	// reach a reservation past its timeout before the Ledger did. OnExpire
	// is not called for it; the Settle's error wraps ErrExpired all the
	// same. It is called from the Ledger's goroutine and must not block.
	OnExpire func(r *Reservation, err error)
}

// Ledger reserves, and keeps the pending reservations until they are
// settled, released, or expire. It is safe for concurrent use. Close it
// when done.
type Ledger struct {
	store    redlimit.Refunder
	timeout  time.Duration
	call     time.Duration
	max      int
	now      func() time.Time
	onExpire func(*Reservation, error)

	mu       sync.Mutex
	pending  pendingHeap
	inflight int // Reserve calls asking the store, counted against max
	closed   bool
	wake     chan struct{} // capacity 1: the earliest deadline changed
	stop     chan struct{}
	done     chan struct{}
}

// New returns a Ledger that reserves in store, and starts its goroutine.
func New(store redlimit.Refunder, opts Options) (*Ledger, error) {
	if store == nil {
		return nil, fmt.Errorf("reserve: nil store")
	}
	if opts.Timeout < 0 || opts.MaxPending < 0 || opts.CallTimeout < 0 {
		return nil, fmt.Errorf("reserve: negative Timeout, MaxPending or CallTimeout")
	}
	l := &Ledger{
		store:    store,
		timeout:  cmp.Or(opts.Timeout, DefaultTimeout),
		call:     cmp.Or(opts.CallTimeout, DefaultCallTimeout),
		max:      cmp.Or(opts.MaxPending, DefaultMaxPending),
		now:      opts.Now,
		onExpire: opts.OnExpire,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	go l.run()
	return l, nil
}

// Close stops the goroutine that releases expired reservations and waits
// for it. Reserve then returns [redlimit.ErrClosed]; pending reservations
// stay consumed unless settled or released (see the package
// documentation). Close is idempotent.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	return nil
}

// Pending returns how many reservations are pending: reserved, and not
// settled, released or expired yet.
func (l *Ledger) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// Reserve reserves estimate units of limit for key: [Ledger.ReserveAll]
// of one request.
func (l *Ledger) Reserve(ctx context.Context, key string, limit redlimit.Limit, estimate int64) (*Reservation, error) {
	return l.ReserveAll(ctx, []redlimit.Request{{Key: key, Limit: limit, Cost: estimate}})
}

// ReserveAll reserves every request's Cost as one admission: all or
// nothing, as [redlimit.Limiter.AllowAll] decides. A denial is a
// Reservation whose OK is false, not an error. An error means nothing was
// reserved. The input was bad: a request that is a debit, wrapping
// [redlimit.ErrInvalidCost]. Or the store failed, ctx ended, too many
// reservations are pending ([ErrTooManyPending]), or the Ledger is closed.
func (l *Ledger) ReserveAll(ctx context.Context, reqs []redlimit.Request) (*Reservation, error) {
	for i, q := range reqs {
		if q.Debit {
			return nil, fmt.Errorf("reserve: request %d: %w: a reservation is an admission, not a debit", i, redlimit.ErrInvalidCost)
		}
	}
	// The slot is taken before the store is asked, so that MaxPending
	// holds however many calls are in flight.
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, fmt.Errorf("reserve: %w", redlimit.ErrClosed)
	case len(l.pending)+l.inflight >= l.max:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrTooManyPending, l.max)
	}
	l.inflight++
	l.mu.Unlock()

	g, err := l.store.Admit(ctx, slicesClone(reqs))

	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	r := &Reservation{ledger: l, grant: g, index: -1}
	if !g.Allowed {
		r.state = denied
		return r, nil
	}
	r.deadline = l.now().Add(l.timeout)
	l.pending.push(r)
	if r.index == 0 {
		l.signal()
	}
	return r, nil
}

func slicesClone(reqs []redlimit.Request) []redlimit.Request {
	return append([]redlimit.Request(nil), reqs...)
}

// signal tells the goroutine that the earliest deadline changed.
func (l *Ledger) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take moves r to state to if r is pending, due or expired. A pending r
// leaves the pending reservations. A due r is one the Ledger will then not
// release. An expired r gets its settle after the timeout, made once. take
// reports the state r was in. If expired, it also returns the channel
// closed once the Ledger has given its estimate back.
func (l *Ledger) take(r *Reservation, to state) (state, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := r.state
	switch was {
	case pending:
		r.state = to
		l.pending.remove(r)
	case due, expired:
		r.state = to
	}
	return was, r.released
}

// run releases the reservations whose deadline has passed, until Close.
func (l *Ledger) run() {
	defer close(l.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := l.releaseExpired()
		t.Reset(next)
		select {
		case <-t.C:
		case <-l.wake:
		case <-l.stop:
			return
		}
	}
}

// releaseExpired releases the reservations due at the Ledger's clock now,
// and returns how long until the next one is due (an hour if none is).
func (l *Ledger) releaseExpired() time.Duration {
	now := l.now()
	var dues []*Reservation
	l.mu.Lock()
	for len(l.pending) > 0 && !l.pending[0].deadline.After(now) {
		r := l.pending[0]
		l.pending.remove(r)
		r.state = due
		dues = append(dues, r)
	}
	next := time.Hour
	if len(l.pending) > 0 {
		next = min(next, l.pending[0].deadline.Sub(now))
	}
	l.mu.Unlock()
	// One at a time. A Settle or Release of a reservation whose turn has
	// not come takes it over (see take). So none waits for the releases
	// before its own, each of up to CallTimeout.
	for _, r := range dues {
		l.mu.Lock()
		if r.state != due {
			l.mu.Unlock()
			continue
		}
		r.state = expired
		r.released = make(chan struct{})
		l.mu.Unlock()
		err := r.giveBack(context.Background(), r.estimates())
		close(r.released)
		if l.onExpire != nil {
			l.onExpire(r, err)
		}
	}
	return next
}
