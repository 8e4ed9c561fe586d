package redlimit

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Refunder is a [Limiter] that can give back part or all of what the
// admissions it allowed consumed. It serves a caller that admits an
// estimate of a cost and learns the real cost afterwards (see the reserve
// package). The
// memory and redisstore stores and resilient.Limiter implement it.
type Refunder interface {
	Limiter
	// Admit decides reqs as AllowAll does and returns the decision as a
	// Grant. The Grant holds what Refund needs to find what the admissions
	// wrote. It also holds a copy of reqs, so the caller may reuse its slice.
	Admit(ctx context.Context, reqs []Request) (*Grant, error)
	// Refund gives back, for each request i of g, up to back[i] units of
	// what it consumed (0 for none). It gives back exactly back[i] when
	// nothing else happened on the request's state since the decision.
	// It never gives back more than the request took. The state afterwards
	// is never more lenient than if the request had cost Cost - back[i],
	// with the same admissions, debits and refunds since. One exception:
	// the window algorithms and the sliding log at the debt bound of
	// [MaxCost] may give back up to back[i] more (see the stores). A
	// token bucket gives back less where it cannot tell that the exact
	// account would (see memory.Store.Refund). When the request's window
	// has passed, or its key was Reset since, less or nothing is given
	// back.
	//
	// A Grant is refunded at most once. A second Refund returns an error
	// wrapping [ErrRefunded] and gives back nothing. So does a Refund whose
	// back does not fit g, wrapping [ErrInvalidCost]. back[i] must be
	// 0..Cost, and 0 for a debit. A denied Grant consumed nothing, and
	// its Refund gives back nothing. An error from the store may leave
	// the cost consumed (the strict side); the Grant is spent all the same.
	Refund(ctx context.Context, g *Grant, back []int64) error
}

// Grant is a decision of a [Refunder], with what its Refund needs. Pass it
// back as it is; it is safe for concurrent use.
type Grant struct {
	Decision
	// Requests are the requests decided, in order.
	Requests []Request
	// Receipt is the store's record of what its admissions wrote, for the
	// store's own use.
	Receipt any

	spent atomic.Bool
}

// spend marks g as refunded and reports whether it was not already.
func (g *Grant) spend() bool { return g.spent.CompareAndSwap(false, true) }

// ValidateRefund checks that back fits g, as [Refunder.Refund] requires,
// and spends g. Errors wrap [ErrInvalidCost] or [ErrRefunded].
func ValidateRefund(g *Grant, back []int64) error {
	if g == nil {
		return fmt.Errorf("%w: nil grant", ErrInvalidGrant)
	}
	if len(back) != len(g.Requests) {
		return fmt.Errorf("%w: %d amounts for %d requests", ErrInvalidCost, len(back), len(g.Requests))
	}
	for i, b := range back {
		r := g.Requests[i]
		switch {
		case b < 0 || b > r.Cost:
			return fmt.Errorf("request %d: %w: gives back %d of a cost of %d", i, ErrInvalidCost, b, r.Cost)
		case b > 0 && r.Debit:
			return fmt.Errorf("request %d: %w: a debit is never given back", i, ErrInvalidCost)
		}
	}
	if !g.spend() {
		return ErrRefunded
	}
	return nil
}
