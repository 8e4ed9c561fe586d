package resilient

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Refunder = (*Limiter)(nil)

// receipt is the Receipt of a Limiter's Grants: the Grant of the path that
// consumed. That is the store's, or the fallback's for the limits in
// localAt. A denial from the deny cache or a fail-open answer consumed
// nothing: it has neither.
type receipt struct {
	store   *redlimit.Grant
	local   *redlimit.Grant
	localAt []int // the caller's index of each request of local
	owed    bool  // local's admissions were owed to the store
}

// Admit implements [redlimit.Refunder] when the store does (and the
// fallback, for the limits it decides). It is AllowAll, through the same
// deadline, breaker and failure policies. Its Grant records which path
// consumed what. On a store that is not a Refunder it returns an error
// wrapping [errors.ErrUnsupported].
func (l *Limiter) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if _, ok := l.store.(redlimit.Refunder); !ok {
		return nil, fmt.Errorf("resilient: admit: the store is not a redlimit.Refunder: %w", errors.ErrUnsupported)
	}
	d, rc, err := l.allowAll(ctx, reqs, true)
	if err != nil {
		return nil, err
	}
	return &redlimit.Grant{Decision: d, Requests: slices.Clone(reqs), Receipt: rc}, nil
}

// Refund implements [redlimit.Refunder]: what the store consumed is given
// back by the store's Refund, within Options.Timeout, and what the local
// fallback consumed by the fallback's. A store that fails keeps what it
// consumed: the error wraps [ErrStore]. The cached denials of the keys
// given back to are dropped either way.
func (l *Limiter) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if err := redlimit.ValidateRefund(g, back); err != nil {
		return fmt.Errorf("resilient: refund: %w", err)
	}
	rc, ok := g.Receipt.(*receipt)
	if !ok {
		return fmt.Errorf("resilient: refund: %w: not made by a resilient.Limiter", redlimit.ErrInvalidGrant)
	}
	var errs []error
	if rc.store != nil {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		err := l.store.(redlimit.Refunder).Refund(cctx, rc.store, back)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: refund: %w", ErrStore, err))
		}
	}
	if rc.local != nil {
		lb := make([]int64, len(rc.localAt))
		for j, i := range rc.localAt {
			lb[j] = back[i]
		}
		if err := l.local.lim.(redlimit.Refunder).Refund(policyContext(ctx), rc.local, lb); err != nil {
			errs = append(errs, fmt.Errorf("resilient: refund in the fallback: %w", err))
		} else if rc.owed && l.rec.debts != nil {
			// What is given back is no longer owed, as far as it has
			// not been charged yet (a charge sent keeps it: the strict
			// side).
			for _, i := range rc.localAt {
				if r := g.Requests[i]; back[i] > 0 {
					l.rec.debts.forgive(r.Key, r.Limit, back[i])
				}
			}
		}
	}
	if l.deny != nil {
		// After the refunds, so that no denial made before them stays.
		now := l.now()
		for i, r := range g.Requests {
			if back[i] > 0 {
				l.deny.forget(r.Key, r.Limit, now)
			}
		}
	}
	return errors.Join(errs...)
}
