package reserve_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/reserve"
)

// huge is a limit whose count is MaxCost: what a key has used is seen
// whole up to the bound of a request's cost.
var huge = []redlimit.Limit{
	redlimit.Per(redlimit.MaxCount, time.Hour).FixedWindow(),
	redlimit.Per(redlimit.MaxCount, time.Hour).SlidingWindow(),
}

// TestSettleBeyondMaxCost: a real cost above redlimit.MaxCost (a model
// answer longer than any request may cost, a buggy caller) is counted as
// MaxCost, the most one request counts, and the reservation is settled
// once; the error wraps ErrCostClamped. It was refused, and the
// reservation left pending, so that its timeout (or a deferred Release)
// gave the whole estimate back: work done counted as nothing.
func TestSettleBeyondMaxCost(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			for _, lim := range huge {
				for _, actual := range []int64{redlimit.MaxCost + 1, 1 << 62} {
					key := fmt.Sprint(lim.Algorithm, "/", actual)
					r, err := l.Reserve(t.Context(), key, lim, 300)
					if err != nil || !r.OK() {
						t.Fatalf("%s: reserve: %v, %v", key, r, err)
					}
					err = r.Settle(t.Context(), actual)
					if !errors.Is(err, reserve.ErrCostClamped) {
						t.Errorf("%s: settle %d: %v, want ErrCostClamped", key, actual, err)
					}
					if got := used(t, s, key, lim); got != redlimit.MaxCost {
						t.Errorf("%s: settled at %d: %d used, want MaxCost (%d)", key, actual, got, int64(redlimit.MaxCost))
					}
					if err := r.Settle(t.Context(), 10); !errors.Is(err, reserve.ErrSettled) {
						t.Errorf("%s: a second settle: %v, want ErrSettled", key, err)
					}
					if err := r.Release(t.Context()); err != nil || used(t, s, key, lim) != redlimit.MaxCost {
						t.Errorf("%s: a release after the settle: %v, %d used", key, err, used(t, s, key, lim))
					}
				}
			}
			if n := l.Pending(); n != 0 {
				t.Errorf("%d pending after every reservation settled", n)
			}
			// On a small limit the key is in debt: the next reservation is
			// denied.
			for _, lim := range algorithms {
				key := "debt/" + lim.String()
				r, _ := l.Reserve(t.Context(), key, lim, 300)
				if err := r.Settle(t.Context(), redlimit.MaxCost+1); !errors.Is(err, reserve.ErrCostClamped) {
					t.Errorf("%s: %v, want ErrCostClamped", key, err)
				}
				if next, err := l.Reserve(t.Context(), key, lim, 1); err != nil || next.OK() {
					t.Errorf("%s: a reservation after a clamped settle: %v, %v; want denied", key, next.OK(), err)
				}
			}
		})
	}
}

// TestSettleExpiredBeyondMaxCost: after the timeout released the
// reservation, a Settle above MaxCost debits MaxCost, and says both; a
// second Settle after the timeout returns ErrSettled (it debited the
// whole cost again).
func TestSettleExpiredBeyondMaxCost(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock, ledgerClock := newClock(), newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: ledgerClock.Now, Timeout: time.Minute})
			for _, lim := range huge {
				r, _ := l.Reserve(t.Context(), "k", lim, 300)
				ledgerClock.Advance(2 * time.Minute)
				l.ReleaseExpired()
				if got := used(t, s, "k", lim); got != 0 {
					t.Fatalf("%s: %d used after the timeout", lim, got)
				}
				err := r.Settle(t.Context(), redlimit.MaxCost+5)
				if !errors.Is(err, reserve.ErrExpired) || !errors.Is(err, reserve.ErrCostClamped) {
					t.Errorf("%s: %v, want ErrExpired and ErrCostClamped", lim, err)
				}
				if got := used(t, s, "k", lim); got != redlimit.MaxCost {
					t.Errorf("%s: %d used, want MaxCost", lim, got)
				}
				// Settled once: a second Settle counts nothing more.
				r, _ = l.Reserve(t.Context(), "twice", lim, 300)
				ledgerClock.Advance(2 * time.Minute)
				l.ReleaseExpired()
				if err := r.Settle(t.Context(), 500); !errors.Is(err, reserve.ErrExpired) {
					t.Errorf("%s: %v, want ErrExpired", lim, err)
				}
				if err := r.Settle(t.Context(), 500); !errors.Is(err, reserve.ErrSettled) {
					t.Errorf("%s: a second settle after the timeout: %v, want ErrSettled", lim, err)
				}
				if got := used(t, s, "twice", lim); got != 500 {
					t.Errorf("%s: settled twice at 500 after the timeout: %d used, want 500", lim, got)
				}
			}
		})
	}
}

// TestSettleNegative: a negative real cost is a caller's bug and says
// nothing of the work: the reservation is settled at its estimate (nothing
// given back, nothing debited) and the error wraps ErrInvalidCost. It was
// refused and left pending, so that a deferred Release gave the estimate
// back. A cost of 0 gives the whole estimate back.
func TestSettleNegative(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			for _, lim := range algorithms {
				r, _ := l.Reserve(t.Context(), "neg", lim, 300)
				if err := r.Settle(t.Context(), -7); !errors.Is(err, redlimit.ErrInvalidCost) {
					t.Errorf("%s: settle -7: %v, want ErrInvalidCost", lim, err)
				}
				if err := r.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := used(t, s, "neg", lim); got != 300 {
					t.Errorf("%s: %d used after a settle at -7 and a release, want the estimate 300", lim, got)
				}
				r, _ = l.Reserve(t.Context(), "zero", lim, 300)
				if err := r.Settle(t.Context(), 0); err != nil || used(t, s, "zero", lim) != 0 {
					t.Errorf("%s: settle 0: %v, %d used", lim, err, used(t, s, "zero", lim))
				}
				// SettleEach: the valid costs are settled, the negative one
				// keeps its estimate.
				r, _ = l.ReserveAll(t.Context(), []redlimit.Request{{Key: "a", Limit: lim, Cost: 100}, {Key: "b", Limit: lim, Cost: 100}})
				if err := r.SettleEach(t.Context(), []int64{-1, 40}); !errors.Is(err, redlimit.ErrInvalidCost) {
					t.Errorf("%s: settle each -1, 40: %v", lim, err)
				}
				if a, b := used(t, s, "a", lim), used(t, s, "b", lim); a != 100 || b != 40 {
					t.Errorf("%s: settle each -1, 40: %d and %d used, want 100 and 40", lim, a, b)
				}
			}
			if n := l.Pending(); n != 0 {
				t.Errorf("%d pending", n)
			}
		})
	}
}

// TestSettleRacesTimeout: a Settle and the Ledger's release at the
// timeout, at once, many times: whichever comes first, the key ends having
// used the real cost (the settle gives back or debits the difference, and
// the release then finds nothing pending; or the release gives the
// estimate back, and the settle debits the whole cost).
func TestSettleRacesTimeout(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock, ledgerClock := newClock(), newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: ledgerClock.Now, Timeout: time.Minute})
			lim := redlimit.PerHour(1_000_000).FixedWindow()
			expired := 0
			for round := range 100 {
				key := fmt.Sprint("k", round)
				actual := []int64{0, 70, 100, 130, redlimit.MaxCost + 1}[round%5]
				want := min(actual, redlimit.MaxCost)
				r, err := l.Reserve(t.Context(), key, lim, 100)
				if err != nil || !r.OK() {
					t.Fatal(r, err)
				}
				ledgerClock.Advance(time.Minute)
				var wg sync.WaitGroup
				var settleErr error
				wg.Go(func() { l.ReleaseExpired() })
				wg.Go(func() { settleErr = r.Settle(t.Context(), actual) })
				wg.Wait()
				if errors.Is(settleErr, reserve.ErrExpired) {
					expired++
				}
				for _, err := range []error{reserve.ErrExpired, reserve.ErrCostClamped} {
					settleErr = stripped(settleErr, err)
				}
				if settleErr != nil {
					t.Errorf("round %d: settle %d: %v", round, actual, settleErr)
				}
				if got := used(t, s, key, lim); got != min(want, lim.Count) {
					t.Errorf("round %d: settled at %d racing the timeout: %d used", round, actual, got)
				}
			}
			t.Logf("%d of 100 settles came after the timeout's release", expired)
			if n := l.Pending(); n != 0 {
				t.Errorf("%d pending", n)
			}
		})
	}
}

// stripped returns nil if err is only target (alone or joined), else err.
func stripped(err, target error) error {
	if err == nil || !errors.Is(err, target) {
		return err
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range j.Unwrap() {
			if e = stripped(e, target); e != nil {
				rest = append(rest, e)
			}
		}
		return errors.Join(rest...)
	}
	return nil
}
