package reserve_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/reserve"
)

// TestSettle settles a reservation of 300 below, at and above its
// estimate, on every algorithm and store: the key has used what the work
// cost, exactly.
func TestSettle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			for _, lim := range algorithms {
				for _, actual := range []int64{0, 120, 300, 450} {
					key := lim.String() + "/" + time.Duration(actual).String()
					r, err := l.Reserve(t.Context(), key, lim, 300)
					if err != nil || !r.OK() {
						t.Fatalf("%s: reserve: %v, %v", key, r, err)
					}
					if got := used(t, s, key, lim); got != 300 {
						t.Errorf("%s: %d used after reserving 300", key, got)
					}
					if err := r.Settle(t.Context(), actual); err != nil {
						t.Fatalf("%s: settle %d: %v", key, actual, err)
					}
					if got := used(t, s, key, lim); got != actual {
						t.Errorf("%s: settled at %d, %d used", key, actual, got)
					}
				}
			}
			if n := l.Pending(); n != 0 {
				t.Errorf("%d pending after every reservation settled", n)
			}
		})
	}
}

// TestSettleIntoDebt settles a reservation of 900 of 1000 at 1500: the
// 600 over the estimate is debited though it does not fit, so the key is in
// debt and the next reservation is denied. It needs the stores' debits.
func TestSettleIntoDebt(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			for _, lim := range algorithms {
				key := "debt/" + lim.String()
				r, err := l.Reserve(t.Context(), key, lim, 900)
				if err != nil || !r.OK() {
					t.Fatalf("%s: reserve: %v, %v", key, r, err)
				}
				if err := r.Settle(t.Context(), 1500); err != nil {
					t.Fatalf("%s: settle: %v", key, err)
				}
				next, err := l.Reserve(t.Context(), key, lim, 1)
				if err != nil || next.OK() {
					t.Errorf("%s: a reservation after a debt of 500: %+v, %v; want denied", key, next.Decision(), err)
				}
				if lim.Algorithm == redlimit.TokenBucket {
					// 1500 tokens at 1000/h: the bucket is empty until the
					// debt of 500 and one more token have drained.
					if want := 501 * 3600 * time.Millisecond; next.RetryAfter() != want {
						t.Errorf("%s: RetryAfter %s, want %s", key, next.RetryAfter(), want)
					}
				}
			}
		})
	}
}

// TestRelease gives the whole estimate back; a Release after Settle, or a
// second Release, does nothing.
func TestRelease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			for _, lim := range algorithms {
				r, err := l.Reserve(t.Context(), "k", lim, 400)
				if err != nil || !r.OK() {
					t.Fatalf("reserve: %v, %v", r, err)
				}
				for range 2 {
					if err := r.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
					if got := used(t, s, "k", lim); got != 0 {
						t.Errorf("%s: %d used after a release", lim, got)
					}
				}
				if err := r.Settle(t.Context(), 10); !errors.Is(err, reserve.ErrSettled) {
					t.Errorf("%s: settle after release: %v, want ErrSettled", lim, err)
				}
				r, _ = l.Reserve(t.Context(), "k", lim, 400)
				if err := r.Settle(t.Context(), 100); err != nil {
					t.Fatal(err)
				}
				if err := r.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := used(t, s, "k", lim); got != 100 {
					t.Errorf("%s: %d used after settle 100 and release, want 100", lim, got)
				}
			}
		})
	}
}

// TestDoubleSettle: of many concurrent Settles and Releases of one
// reservation, exactly one settles it; the others get ErrSettled or do
// nothing.
func TestDoubleSettle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			lim := redlimit.PerHour(1000).FixedWindow()
			for round := range 20 {
				r, err := l.Reserve(t.Context(), "k", lim, 100)
				if err != nil || !r.OK() {
					t.Fatalf("reserve: %v, %v", r, err)
				}
				var ok, settled atomic.Int32
				var wg sync.WaitGroup
				for i := range 16 {
					wg.Go(func() {
						if i%4 == 0 {
							if err := r.Release(t.Context()); err != nil {
								t.Error(err)
							}
							return
						}
						switch err := r.Settle(t.Context(), 40); {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, reserve.ErrSettled):
							settled.Add(1)
						default:
							t.Error(err)
						}
					})
				}
				wg.Wait()
				want := int64(40) * int64(round+1)
				if ok.Load() == 0 {
					want -= 40 // a Release won
				}
				if ok.Load() > 1 || ok.Load()+settled.Load() != 12 {
					t.Fatalf("round %d: %d settles succeeded, %d ErrSettled", round, ok.Load(), settled.Load())
				}
				if ok.Load() == 0 {
					// Keep the running total simple: count it as settled.
					r2, _ := l.Reserve(t.Context(), "k", lim, 40)
					_ = r2.Settle(t.Context(), 40)
					want += 40
				}
				if got := used(t, s, "k", lim); got != want {
					t.Fatalf("round %d: %d used, want %d", round, got, want)
				}
			}
		})
	}
}

// TestTimeoutRelease: a reservation not settled within Timeout is released
// by the Ledger's clock; a Settle after that debits the whole real cost and
// says ErrExpired.
func TestTimeoutRelease(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			ledgerClock := newClock()
			s := b.make(t, uniq(), clock.Now)
			var expired atomic.Int32
			l := newLedger(t, s, reserve.Options{Now: ledgerClock.Now, Timeout: time.Minute, OnExpire: func(_ *reserve.Reservation, err error) {
				if err != nil {
					t.Error(err)
				}
				expired.Add(1)
			}})
			lim := redlimit.PerHour(1000).SlidingLog()
			r1, _ := l.Reserve(t.Context(), "k", lim, 300)
			ledgerClock.Advance(30 * time.Second)
			r2, _ := l.Reserve(t.Context(), "k", lim, 200)
			if !r1.OK() || !r2.OK() || l.Pending() != 2 {
				t.Fatalf("reservations %v %v, %d pending", r1.OK(), r2.OK(), l.Pending())
			}
			ledgerClock.Advance(31 * time.Second)
			if next := l.ReleaseExpired(); next != 29*time.Second {
				t.Errorf("next expiry in %s, want 29s", next)
			}
			if l.Pending() != 1 || expired.Load() != 1 || used(t, s, "k", lim) != 200 {
				t.Errorf("after r1's timeout: %d pending, %d expired, %d used; want 1, 1, 200", l.Pending(), expired.Load(), used(t, s, "k", lim))
			}
			if err := r1.Settle(t.Context(), 250); !errors.Is(err, reserve.ErrExpired) {
				t.Errorf("settle after expiry: %v, want ErrExpired", err)
			}
			if err := r2.Settle(t.Context(), 50); err != nil {
				t.Fatal(err)
			}
			if got := used(t, s, "k", lim); got != 300 {
				t.Errorf("%d used, want 250 + 50", got)
			}
			if err := r1.Release(t.Context()); err != nil || used(t, s, "k", lim) != 300 {
				t.Errorf("release after expiry and settle changed the key: %v, %d", err, used(t, s, "k", lim))
			}
		})
	}
}

// TestTimeoutReleaseInBackground: the Ledger's own goroutine releases an
// expired reservation, on the real clock.
func TestTimeoutReleaseInBackground(t *testing.T) {
	clock := newClock()
	s := backends[0].make(t, "", clock.Now)
	l := newLedger(t, s, reserve.Options{Timeout: 20 * time.Millisecond})
	lim := redlimit.PerHour(1000).TokenBucket(1000)
	for range 3 {
		if r, err := l.Reserve(t.Context(), "k", lim, 100); err != nil || !r.OK() {
			t.Fatal(r, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.Pending() > 0 || used(t, s, "k", lim) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, %d used 10 s after a timeout of 20 ms", l.Pending(), used(t, s, "k", lim))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMaxPending: beyond MaxPending reservations, Reserve fails with
// ErrTooManyPending and consumes nothing; a settled one makes room.
func TestMaxPending(t *testing.T) {
	clock := newClock()
	s := backends[0].make(t, "", clock.Now)
	l := newLedger(t, s, reserve.Options{Now: clock.Now, MaxPending: 3})
	lim := redlimit.PerHour(1000).FixedWindow()
	var rs []*reserve.Reservation
	for range 3 {
		r, err := l.Reserve(t.Context(), "k", lim, 10)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if _, err := l.Reserve(t.Context(), "k", lim, 10); !errors.Is(err, reserve.ErrTooManyPending) {
		t.Errorf("a fourth reservation: %v, want ErrTooManyPending", err)
	}
	if got := used(t, s, "k", lim); got != 30 {
		t.Errorf("%d used, want 30: the refused reservation consumed", got)
	}
	if err := rs[1].Settle(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(t.Context(), "k", lim, 10); err != nil {
		t.Errorf("after a settle: %v", err)
	}
	// Denied reservations are not pending.
	if err := rs[0].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if r, err := l.Reserve(t.Context(), "other", lim, 5000); err != nil || r.OK() {
			t.Errorf("too costly: %v, %v", r.OK(), err)
		}
	}
}

// TestContextCanceled: a Reserve whose context is canceled reserves
// nothing; a Settle whose context is canceled settles all the same (the
// client went away, the work was done).
func TestContextCanceled(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now})
			lim := redlimit.PerHour(1000).FixedWindow()
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := l.Reserve(ctx, "k", lim, 10); !errors.Is(err, context.Canceled) {
				t.Errorf("reserve with a canceled context: %v", err)
			}
			if l.Pending() != 0 || used(t, s, "k", lim) != 0 {
				t.Errorf("a canceled reserve left %d pending, %d used", l.Pending(), used(t, s, "k", lim))
			}
			r, err := l.Reserve(t.Context(), "k", lim, 100)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Settle(ctx, 70); err != nil {
				t.Fatal(err)
			}
			if got := used(t, s, "k", lim); got != 70 {
				t.Errorf("settled with a canceled context: %d used, want 70", got)
			}
		})
	}
}

// TestBadInput: errors wrap the sentinels, and leave the reservation as
// it was (TestSettleNegative and TestSettleBeyondMaxCost: costs that do
// not fit a request still settle it).
func TestBadInput(t *testing.T) {
	clock := newClock()
	s := backends[0].make(t, "", clock.Now)
	l := newLedger(t, s, reserve.Options{Now: clock.Now})
	lim := redlimit.PerHour(1000).FixedWindow()
	if _, err := l.Reserve(t.Context(), "k", lim, 0); !errors.Is(err, redlimit.ErrInvalidCost) {
		t.Errorf("estimate 0: %v", err)
	}
	if _, err := l.ReserveAll(t.Context(), []redlimit.Request{{Key: "k", Limit: lim, Cost: 1, Debit: true}}); !errors.Is(err, redlimit.ErrInvalidCost) {
		t.Errorf("a debit: %v", err)
	}
	r, _ := l.Reserve(t.Context(), "k", lim, 10)
	if err := r.SettleEach(t.Context(), []int64{1, 2}); !errors.Is(err, redlimit.ErrInvalidCost) {
		t.Errorf("two costs for one request: %v", err)
	}
	if l.Pending() != 1 {
		t.Errorf("bad settles took the reservation: %d pending", l.Pending())
	}
	denied, _ := l.Reserve(t.Context(), "k", lim, 5000)
	if err := denied.Settle(t.Context(), 1); !errors.Is(err, reserve.ErrDenied) {
		t.Errorf("settle of a denial: %v", err)
	}
	l.Close()
	if _, err := l.Reserve(t.Context(), "k", lim, 1); !errors.Is(err, redlimit.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := r.Settle(t.Context(), 4); err != nil || used(t, s, "k", lim) != 4 {
		t.Errorf("settle after Close: %v, %d used", err, used(t, s, "k", lim))
	}
}
