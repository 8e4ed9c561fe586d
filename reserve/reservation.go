package reserve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

// state is where a Reservation is in its life.
type state uint8

const (
	pending state = iota // reserved, in the Ledger's heap
	denied               // the store denied it: nothing consumed
	settled              // settled or released
	due                  // past its deadline, taken out of the heap; the Ledger has not begun its release
	expired              // released by the Ledger at its deadline
)

// Reservation is an admission of an estimated cost, to be settled with the
// real cost (see the package documentation). It is safe for concurrent use.
type Reservation struct {
	ledger   *Ledger
	grant    *redlimit.Grant
	deadline time.Time
	index    int   // in the Ledger's heap, -1 when not in it; guarded by the Ledger's lock
	state    state // guarded by the Ledger's lock
	// released is made when the Ledger expires the reservation (under its
	// lock). It is closed once the estimate was given back. A Settle then
	// waits for it, so it returns with both counted.
	released chan struct{}
}

// OK reports whether the reservation was admitted. One that was not
// consumed nothing, and needs neither Settle nor Release.
func (r *Reservation) OK() bool { return r.grant.Allowed }

// Decision returns the store's decision on the reservation: its Results
// say what each limit has left, or, when denied, why.
func (r *Reservation) Decision() redlimit.Decision { return r.grant.Decision }

// RetryAfter is how long until a reservation of the same estimate could
// pass, as the limits that denied it say; 0 when OK.
func (r *Reservation) RetryAfter() time.Duration { return r.grant.RetryAfter() }

// Deadline returns when the Ledger releases the reservation if it is still
// pending; the zero time for a denied one.
func (r *Reservation) Deadline() time.Time { return r.deadline }

// Requests returns the requests reserved: their Cost is the estimate.
func (r *Reservation) Requests() []redlimit.Request {
	return append([]redlimit.Request(nil), r.grant.Requests...)
}

// Settle settles the reservation with the real cost, the same for each of
// its requests: [Reservation.SettleEach] with actual for every request.
func (r *Reservation) Settle(ctx context.Context, actual int64) error {
	all := make([]int64, len(r.grant.Requests))
	for i := range all {
		all[i] = actual
	}
	return r.SettleEach(ctx, all)
}

// SettleEach settles the reservation with the real cost of each request,
// in order. Below its estimate, the difference is given back. Above it,
// the difference is debited. Each takes one call to the store. It returns
// an error wrapping [ErrSettled] when the reservation was settled or
// released already. It returns [ErrDenied] when it was denied; nothing
// happens then. After the Ledger released the reservation at its timeout,
// the whole real cost is debited, and the error wraps [ErrExpired].
//
// A cost that is not one a request can count still settles the
// reservation, once. So the work done is counted, and a deferred Release
// does not give it back. One above [redlimit.MaxCost] is counted as
// MaxCost, the most a request counts and the most debt a key carries. The
// error then wraps [ErrCostClamped]. A negative one keeps that request's
// estimate, nothing given back or debited. The error then wraps
// [redlimit.ErrInvalidCost]. Only a wrong number of costs leaves the
// reservation pending, with an error wrapping ErrInvalidCost.
func (r *Reservation) SettleEach(ctx context.Context, actual []int64) error {
	reqs := r.grant.Requests
	if len(actual) != len(reqs) {
		return fmt.Errorf("reserve: settle: %w: %d costs for %d requests", redlimit.ErrInvalidCost, len(actual), len(reqs))
	}
	var errs []error
	cost := make([]int64, len(actual))
	for i, a := range actual {
		switch {
		case a < 0:
			cost[i] = reqs[i].Cost
			errs = append(errs, fmt.Errorf("reserve: settle: request %d: %w: %d is negative; its estimate %d is kept", i, redlimit.ErrInvalidCost, a, reqs[i].Cost))
		case a > redlimit.MaxCost:
			cost[i] = redlimit.MaxCost
			errs = append(errs, fmt.Errorf("reserve: settle: request %d: %w: %d", i, ErrCostClamped, a))
		default:
			cost[i] = a
		}
	}
	was, released := r.ledger.take(r, settled)
	switch was {
	case denied:
		return ErrDenied
	case settled:
		return ErrSettled
	case due:
		// Past its deadline, but the Ledger had not begun to give it
		// back. It never will. The reservation is settled here as a
		// pending one is, without waiting for the releases before it.
		errs = append(errs, fmt.Errorf("reserve: settle: %w", ErrExpired))
	case expired:
		// The estimate is given back (within CallTimeout): the work done
		// is counted whole.
		<-released
		errs = append(errs, fmt.Errorf("reserve: settle: %w", ErrExpired), r.debit(ctx, cost))
		return errors.Join(errs...)
	}
	back := make([]int64, len(reqs))
	over := make([]int64, len(reqs))
	for i, a := range cost {
		if d := reqs[i].Cost - a; d > 0 {
			back[i] = d
		} else {
			over[i] = -d
		}
	}
	errs = append(errs, r.giveBack(ctx, back), r.debit(ctx, over))
	return errors.Join(errs...)
}

// Release gives the whole estimate back, for work that did not happen. It
// does nothing (and returns nil) when the reservation was denied, settled,
// released or expired already, so it can be deferred right after Reserve.
func (r *Reservation) Release(ctx context.Context) error {
	if was, _ := r.ledger.take(r, settled); was != pending && was != due {
		return nil
	}
	return r.giveBack(ctx, r.estimates())
}

// estimates returns each request's estimate: all of what it reserved.
func (r *Reservation) estimates() []int64 {
	all := make([]int64, len(r.grant.Requests))
	for i, q := range r.grant.Requests {
		all[i] = q.Cost
	}
	return all
}

// callContext is ctx without its cancellation and deadline, bounded by the
// Ledger's CallTimeout. What is settled must reach the store even when the
// caller has gone away.
func (r *Reservation) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.ledger.call)
}

// giveBack refunds back of the grant (all zero: nothing to do). The grant
// is refunded once: a reservation gives back once, at Settle, Release or
// expiry.
func (r *Reservation) giveBack(ctx context.Context, back []int64) error {
	some := false
	for _, b := range back {
		some = some || b > 0
	}
	if !some {
		return nil
	}
	cctx, cancel := r.callContext(ctx)
	defer cancel()
	if err := r.ledger.store.Refund(cctx, r.grant, back); err != nil {
		return fmt.Errorf("reserve: give back: %w", err)
	}
	return nil
}

// debit counts over of each request (zeros skipped) as debits, in one
// decision. A store that decides in parts (Redis Cluster) may count some
// and not others. A failed part leaves its limits Undecided in a denial,
// when another debit did not fit. Or it fails the call. The error names
// the requests that were not, or may not have been, counted.
func (r *Reservation) debit(ctx context.Context, over []int64) error {
	var reqs []redlimit.Request
	var idx []int
	for i, q := range r.grant.Requests {
		if over[i] > 0 {
			reqs = append(reqs, redlimit.Request{Key: q.Key, Limit: q.Limit, Cost: over[i], Debit: true})
			idx = append(idx, i)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	cctx, cancel := r.callContext(ctx)
	defer cancel()
	d, err := r.ledger.store.AllowAll(cctx, reqs)
	if err != nil {
		return fmt.Errorf("%w: requests %v, wholly or in part: %w", ErrNotDebited, idx, err)
	}
	if len(d.Results) != len(reqs) {
		return fmt.Errorf("%w: requests %v: %w: %d results", ErrNotDebited, idx, redlimit.ErrBadReply, len(d.Results))
	}
	var lost []int
	for j, res := range d.Results {
		if res.Source == redlimit.Undecided {
			lost = append(lost, idx[j])
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w: requests %v (the store left them undecided)", ErrNotDebited, lost)
	}
	return nil
}
