package reserve_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/reserve"
)

// hungRefunds is a store whose Refund hangs until its context ends, as a
// Redis that stopped answering, once hung is set.
type hungRefunds struct {
	redlimit.Refunder
	mu   sync.Mutex
	hung bool
}

func (s *hungRefunds) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	s.mu.Lock()
	hung := s.hung
	s.mu.Unlock()
	if hung {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Refunder.Refund(ctx, g, back)
}

// TestLateSettleBoundedByCallTimeout: Settle takes at most CallTimeout (the
// package says so), or about twice that for one after the timeout (the
// Ledger's release, then the debit). With many reservations expiring at
// once on a store that hangs, the Ledger gives them back one after the
// other, and a late Settle of the last one waits for all the releases
// before it.
func TestLateSettleBoundedByCallTimeout(t *testing.T) {
	clock := newClock()
	m, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := &hungRefunds{Refunder: m}
	// A Settle takes about 2 calls; one that waited for the 20 releases
	// before it, 20. The bound of 6 leaves a busy machine 4 calls.
	const call = 100 * time.Millisecond
	l := newLedger(t, s, reserve.Options{Now: clock.Now, Timeout: time.Minute, CallTimeout: call})
	lim := redlimit.PerHour(1000)
	var rs []*reserve.Reservation
	for range 20 {
		r, err := l.Reserve(t.Context(), "k", lim, 10)
		if err != nil || !r.OK() {
			t.Fatal(r, err)
		}
		rs = append(rs, r)
	}
	s.mu.Lock()
	s.hung = true
	s.mu.Unlock()
	clock.Advance(2 * time.Minute)
	go l.ReleaseExpired()
	time.Sleep(10 * time.Millisecond) // the release has begun
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			start := time.Now()
			err := r.Settle(context.Background(), 5)
			if took := time.Since(start); took > 6*call {
				t.Errorf("reservation %d: a late Settle took %v with a CallTimeout of %v", i, took.Round(time.Millisecond), call)
			}
			if !errors.Is(err, reserve.ErrExpired) {
				t.Errorf("reservation %d: Settle: %v", i, err)
			}
		})
	}
	wg.Wait()
}
