package memory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// fullStore returns a store of at most keys states, holding used of them,
// each spent for an hour.
func fullStore(t *testing.T, keys, used int) (*memory.Store, *redlimittest.Clock) {
	t.Helper()
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithClock(clock.Now), memory.WithMaxKeys(keys), memory.WithSweepInterval(0))
	for i := range used {
		if r, err := s.AllowN(context.Background(), fmt.Sprint("used", i), redlimit.PerHour(1).FixedWindow(), 1); err != nil || !r.Allowed {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	return s, clock
}

// TestFullStoreChecksKeepBudget (issue 25, item 3): the check-then-debit
// flow on a store full of states in use. A check (Peek) of a key with no
// state passed, as Peek did not foresee the refusal, and the debit that
// followed was refused and never counted: ten checks and ten debits of 100
// against a budget of 100 an hour, none counted. A check the store has no
// room for is refused, as the request would be.
func TestFullStoreChecksKeepBudget(t *testing.T) {
	ctx := context.Background()
	budget := redlimit.PerHour(100).FixedWindow()
	for _, l := range []redlimit.Limit{budget, redlimit.PerHour(100).SlidingLog(), redlimit.PerHour(100).TokenBucket(100)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			s, _ := fullStore(t, 16, 16)
			var spent int64
			for range 10 {
				r, err := s.Peek(ctx, "tenant", l, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed {
					if r.RetryAfter <= 0 || r.Remaining != 0 {
						t.Fatalf("a refused check: %+v", r)
					}
					continue
				}
				spent += 100
				if _, err := redlimit.Debit(ctx, s, "tenant", l, 100); err != nil {
					t.Fatal(err)
				}
			}
			if spent > 0 {
				t.Errorf("checks let %d units of work through a budget of 100; the store counted %d states (%+v)", spent, s.Len(), s.Stats())
			}
			if st := s.Stats(); st.Refused != 10 || st.States != 16 {
				t.Errorf("stats %+v, want 10 checks refused and 16 states", st)
			}
		})
	}
}

// TestFullStoreCountsDebits (issue 25, item 3): a debit is never dropped.
// A check passes while the store has room; another key takes it; the
// debit that follows is counted all the same, beyond the bound. Past what
// debits may take beyond the bounds, a debit is an error, ErrFull, and
// nothing of its decision is counted.
func TestFullStoreCountsDebits(t *testing.T) {
	ctx := context.Background()
	budget := redlimit.PerHour(100).FixedWindow()
	s, _ := fullStore(t, 16, 15)
	if r, err := s.Peek(ctx, "tenant", budget, 1); err != nil || !r.Allowed {
		t.Fatalf("a check with room: %+v, %v", r, err)
	}
	if r, err := s.AllowN(ctx, "other", budget, 1); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, err := redlimit.Debit(ctx, s, "tenant", budget, 100); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("the debit of the checked work: %+v, %v, want counted, 0 left", r, err)
	}
	if r, err := s.Peek(ctx, "tenant", budget, 1); err != nil || r.Allowed {
		t.Errorf("after a debit of the whole budget, a check: %+v, %v, want denied", r, err)
	}
	// WithMaxKeys(16) lets debits take two states more.
	if _, err := redlimit.Debit(ctx, s, "late", budget, 7); err != nil {
		t.Fatalf("a debit within what debits may take beyond the bound: %v", err)
	}
	if st := s.Stats(); st.States != 18 {
		t.Errorf("stats %+v, want 18 states", st)
	}
	d, err := s.AllowAll(ctx, []redlimit.Request{
		{Key: "other", Limit: budget, Cost: 1},
		{Key: "too-late", Limit: budget, Cost: 7, Debit: true},
	})
	if !errors.Is(err, memory.ErrFull) {
		t.Fatalf("a debit beyond what debits may take: %+v, %v, want ErrFull", d, err)
	}
	if r, err := s.Peek(ctx, "other", budget, 1); err != nil || r.Remaining != 98 {
		t.Errorf("the failed decision counted its admission: %+v, %v", r, err)
	}
	if st := s.Stats(); st.States != 18 {
		t.Errorf("stats %+v, want 18 states", st)
	}
}

// TestFullStoreDebitsConcurrent: 16 goroutines run Envoy's
// check-then-debit flow on new keys, and admit other new keys, on a store
// that fills. Every debit is counted, or fails with
// ErrFull and counts nothing; the store never holds more states than
// debits may take (an eighth beyond the bound).
func TestFullStoreDebitsConcurrent(t *testing.T) {
	ctx := context.Background()
	budget := redlimit.PerHour(100).FixedWindow()
	s := newStoreNoCleanup(t, memory.WithMaxKeys(64), memory.WithSweepInterval(0))
	var counted, failed [16]int
	runWorkers(t, 16, 200, func(g, i int) {
		key := fmt.Sprint("g", g, "/", i)
		if i%2 == 0 {
			if _, err := s.AllowN(ctx, key, budget, 1); err != nil {
				t.Error(err)
			}
			return
		}
		r, err := s.Peek(ctx, key, budget, 1)
		if err != nil || !r.Allowed {
			if err != nil || r.RetryAfter <= 0 {
				t.Errorf("check %q: %+v, %v", key, r, err)
			}
			return // no work, so no debit
		}
		_, err = redlimit.Debit(ctx, s, key, budget, 40)
		switch {
		case errors.Is(err, memory.ErrFull):
			failed[g]++
			// Allowed with 39 left, or refused with 0: not 60, counted.
			if p, err := s.Peek(ctx, key, budget, 61); err != nil || p.Remaining == 60 {
				t.Errorf("%q after a debit that failed: %+v, %v, want nothing counted", key, p, err)
			}
		case err != nil:
			t.Errorf("debit %q: %v", key, err)
		default:
			counted[g]++
			if p, err := s.Peek(ctx, key, budget, 61); err != nil || p.Allowed {
				t.Errorf("%q after a debit of 40 of 100: a check of 61: %+v, %v, want denied", key, p, err)
			}
		}
		if n := s.Len(); n > 72 {
			t.Errorf("%d states, more than debits may take", n)
		}
	})
	s.Close()
	var c, f int
	for g := range counted {
		c, f = c+counted[g], f+failed[g]
	}
	// A debit fails only when more checks passed at once than debits may
	// take beyond the bound: rare with 16 goroutines and room for 8.
	t.Logf("%d debits of checks that passed counted, %d failed with ErrFull, %+v", c, f, s.Stats())
	if c == 0 || f > c {
		t.Errorf("%d debits counted, %d failed", c, f)
	}
}
