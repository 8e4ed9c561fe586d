package resilient_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestDebitIsNeverAnsweredByTheDenyCache: a request that carries a debit
// reaches the store even while the deny cache holds a denial of its key,
// since the debit has to be counted there.
func TestDebitIsNeverAnsweredByTheDenyCache(t *testing.T) {
	t.Parallel()
	store := &counting{Limiter: redisStore(t, []string{redistest.Shared(t).Addr()})}
	l := newLimiter(t, store, resilient.Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	lim := redlimit.PerHour(2).FixedWindow()
	other := redlimit.PerHour(100).FixedWindow()
	for range 3 {
		if _, err := l.Allow(ctx, "k", lim); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := l.Allow(ctx, "k", lim); err != nil || r.Source != redlimit.FromDenyCache {
		t.Fatalf("want a cached denial: %+v, %v", r, err)
	}
	calls := store.calls.Load()
	for _, reqs := range [][]redlimit.Request{
		{{Key: "k", Limit: lim, Cost: 2, Debit: true}},
		{{Key: "k", Limit: lim, Cost: 1}, {Key: "k2", Limit: other, Cost: 5, Debit: true}},
	} {
		d, err := l.AllowAll(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range d.Results {
			if r.Source != redlimit.FromStore {
				t.Errorf("%+v: result %d from %s, want the store", reqs, i, r.Source)
			}
		}
	}
	if n := store.calls.Load() - calls; n != 2 {
		t.Errorf("the store was called %d times for 2 decisions with debits", n)
	}
}

// outageLimiter returns a limiter (one node) on a Redis of its own, quick
// to fall back and to come back, and that Redis.
func outageLimiter(t *testing.T, opts resilient.Options, wrap func(redlimit.Limiter) redlimit.Limiter) (*resilient.Limiter, *redistest.Server, redlimit.Limiter) {
	t.Helper()
	srv := redistest.Start(t)
	var store redlimit.Limiter = redisStore(t, []string{srv.Addr()})
	if wrap != nil {
		store = wrap(store)
	}
	opts.Timeout = cmp.Or(opts.Timeout, 100*time.Millisecond)
	// The breaker's probe, sent to the frozen Redis, would be counted
	// there when it resumes: none during the test's local decisions.
	opts.Breaker.FailureThreshold, opts.Breaker.CoolDown = 1, 500*time.Millisecond
	return newLimiter(t, store, opts), srv, store
}

// freeze pauses srv and waits until l's breaker is open: until then a call
// may still be sent to the frozen Redis, which would count it on resuming.
func freeze(t *testing.T, srv *redistest.Server, ls ...*resilient.Limiter) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if !waitFor(10*time.Second, func() bool {
			l.Allow(context.Background(), fmt.Sprint("unrelated-", rand.Uint64()), redlimit.PerHour(1000).OnFailure(redlimit.FailOpen))
			return l.BreakerState() == "open"
		}) {
			t.Fatal("the breaker never opened")
		}
	}
}

// backOnStore waits until l decides on the store again (a request for an
// unrelated key), which starts the reconciliation.
func backOnStore(t *testing.T, l *resilient.Limiter) {
	t.Helper()
	if !waitFor(10*time.Second, func() bool {
		// fail_open: its local admissions are not owed.
		r, err := l.Allow(context.Background(), fmt.Sprint("unrelated-", rand.Uint64()), redlimit.PerHour(1000).OnFailure(redlimit.FailOpen))
		return err == nil && r.Source == redlimit.FromStore
	}) {
		t.Fatal("decisions never came back to the store")
	}
}

// admitLocally admits n requests of key under lim on l, which must decide
// them by its local fallback (the store being down).
func admitLocally(t *testing.T, l *resilient.Limiter, key string, lim redlimit.Limit, n int) {
	t.Helper()
	for i := range n {
		r, err := l.Allow(context.Background(), key, lim)
		if err != nil || !r.Allowed || r.Source != redlimit.FromLocal {
			t.Fatalf("%s: local admission %d: %+v, %v", key, i, r, err)
		}
	}
}

// TestReconcileChargesWhatWasAdmittedLocally: what the local fallback
// admitted while Redis was frozen is counted by Redis afterwards, past the
// limit (as a debit), whether charged in the background or inline: before
// the store decides the key again, or, with a store that counts each
// charge at most once, after its first decision.
func TestReconcileChargesWhatWasAdmittedLocally(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		inline, once bool
	}{{"background", false, true}, {"inline", true, true}, {"inline-at-most-once", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inline := c.inline
			spread := -time.Nanosecond // at once
			if inline {
				spread = time.Hour // never in the test's time
			}
			var wrap func(redlimit.Limiter) redlimit.Limiter
			if !c.once {
				wrap = func(s redlimit.Limiter) redlimit.Limiter { return atMostOnce{s} }
			}
			// LastSeenSize -1: the local fallback admits its whole share,
			// so that the charge takes the key past its limit.
			l, srv, store := outageLimiter(t, resilient.Options{Fallback: resilient.FallbackOptions{LastSeenSize: -1}, Reconcile: resilient.ReconcileOptions{Spread: spread}}, wrap)
			ctx := context.Background()
			lim := redlimit.PerHour(100).FixedWindow()
			// 80 taken on Redis, on a key no local decision touched: on a
			// loaded machine the first calls may pass the 100 ms deadline
			// and be decided locally, so each try takes a new key.
			k, owed := "", int64(100) // the 100 admitted locally below
			if !waitFor(10*time.Second, func() bool {
				k = fmt.Sprint("k", rand.Uint64())
				r, err := l.AllowN(ctx, k, lim, 80)
				if err == nil && r.Allowed && r.Source == redlimit.FromLocal {
					owed += 80 // a try decided locally is owed too
				}
				return err == nil && r.Allowed && r.Source == redlimit.FromStore
			}) {
				t.Fatal("no decision on Redis before the outage")
			}
			freeze(t, srv, l)
			admitLocally(t, l, k, lim, 100)
			if r, _ := l.Allow(ctx, k, lim); r.Allowed {
				t.Fatalf("the local share is 100: %+v", r)
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			if inline {
				// An unrelated key takes the breaker's probe, which
				// charges nothing; the first call for k after it
				// charges k's debt before the store decides it, or,
				// at most once, after.
				backOnStore(t, l)
				r, err := l.Peek(ctx, k, lim, 1)
				if !c.once {
					if err != nil || !r.Allowed || r.Source != redlimit.FromStore {
						t.Errorf("the first Peek on the store after the outage: %+v, %v; want the store's answer before the charge", r, err)
					}
					r, err = l.Peek(ctx, k, lim, 1)
				}
				if err != nil || r.Allowed || r.Remaining != 0 || r.Source != redlimit.FromStore {
					t.Errorf("Peek on the store after the outage: %+v, %v; want the debt charged", r, err)
				}
			} else {
				backOnStore(t, l)
				waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 })
			}
			want := resilient.Reconciliation{Charged: owed}
			if inline {
				// Only k is asked for again; tries decided locally stay owed.
				want = resilient.Reconciliation{Charged: 100, Owed: int((owed - 100) / 80)}
			}
			if rc := l.Reconciliation(); rc != want {
				t.Errorf("reconciliation: %+v, want %+v", rc, want)
			}
			r, err := store.Peek(ctx, k, lim, 1)
			if err != nil || r.Allowed || r.Remaining != 0 {
				t.Errorf("Redis after the charge: %+v, %v; want the key in debt", r, err)
			}
		})
	}
}

// gatedCharges is a Redis store whose charges (DebitOnce) wait until open
// is closed, or their context ends.
type gatedCharges struct {
	*redisstore.Store
	open    chan struct{}
	waiting atomic.Int32 // charges waiting for open
}

func (s *gatedCharges) DebitOnce(ctx context.Context, req redlimit.Request, id string) (redlimit.Result, bool, error) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case <-s.open:
	case <-ctx.Done():
		return redlimit.Result{}, false, ctx.Err()
	}
	return s.Store.DebitOnce(ctx, req, id)
}

// TestReconcileHoldsDecisionsWhileCharging: while a state's debt is being
// charged, the node's other calls for the state wait for the charge
// rather than have the store decide them without it; a caller whose
// deadline comes first gets the local fallback's answer within it.
func TestReconcileHoldsDecisionsWhileCharging(t *testing.T) {
	t.Parallel()
	var gs *gatedCharges
	l, srv, _ := outageLimiter(t, resilient.Options{Timeout: time.Second, Fallback: resilient.FallbackOptions{LastSeenSize: -1}, Reconcile: resilient.ReconcileOptions{Spread: time.Hour}}, func(s redlimit.Limiter) redlimit.Limiter {
		gs = &gatedCharges{Store: s.(*redisstore.Store), open: make(chan struct{})}
		return gs
	})
	ctx := context.Background()
	lim := redlimit.PerHour(100).FixedWindow()
	freeze(t, srv, l)
	admitLocally(t, l, "k", lim, 100)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	backOnStore(t, l)

	// The first call charges k's debt, and waits at the gate; the others
	// wait for that charge.
	const calls = 8
	results := make(chan redlimit.Result, calls)
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			r, err := l.Allow(ctx, "k", lim)
			results <- r
			errs <- err
		})
	}
	if !waitFor(5*time.Second, func() bool { return gs.waiting.Load() == 1 }) {
		t.Fatal("no charge of k was sent")
	}
	// A caller whose deadline comes before the charge ends is answered
	// by the local fallback (whose share is spent) within its deadline,
	// not the store's 1s timeout. A busy machine may stall one call: the
	// fastest of 3 shows it.
	fastest := time.Hour
	for range 3 {
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		r, err := l.Allow(sctx, "k", lim)
		cancel()
		took := time.Since(start)
		if err != nil || r.Allowed || r.Source != redlimit.FromLocal {
			t.Errorf("a caller with a 20 ms deadline while k's charge is sent: %+v, %v after %s; want the local denial", r, err, took)
		}
		fastest = min(fastest, took)
	}
	if fastest > 500*time.Millisecond {
		t.Errorf("callers with a 20 ms deadline while k's charge is sent: the fastest answered after %s", fastest)
	}
	// Its wait said nothing of the store (FailureThreshold is 1).
	if s := l.BreakerState(); s != "closed" {
		t.Errorf("the breaker is %s after a call held behind a charge ran out of time", s)
	}
	time.Sleep(50 * time.Millisecond)
	close(gs.open)
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for r := range results {
		if r.Allowed || r.Source != redlimit.FromStore {
			t.Errorf("a call held while k's charge was sent: %+v; want the store's denial, the debt charged", r)
		}
	}
	if rc := l.Reconciliation(); rc.Charged != 100 || rc.Owed != 0 {
		t.Errorf("reconciliation: %+v, want 100 charged", rc)
	}
}

// TestReconcileChargeFailsBeforeDeciding: when the charge sent before a
// decision fails, the state stays owed and the failure policy answers, as
// during the outage; the next call sends the charge again with its id,
// then the store decides with the debt.
func TestReconcileChargeFailsBeforeDeciding(t *testing.T) {
	t.Parallel()
	var fs *firstChargeFails
	l, srv, _ := outageLimiter(t, resilient.Options{Fallback: resilient.FallbackOptions{LastSeenSize: -1}, Reconcile: resilient.ReconcileOptions{Spread: time.Hour}}, func(s redlimit.Limiter) redlimit.Limiter {
		fs = &firstChargeFails{Store: s.(*redisstore.Store)}
		return fs
	})
	ctx := context.Background()
	lim := redlimit.PerHour(100).FixedWindow()
	freeze(t, srv, l)
	admitLocally(t, l, "k", lim, 99)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	backOnStore(t, l)
	r, err := l.Allow(ctx, "k", lim)
	if err != nil || !r.Allowed || r.Source != redlimit.FromLocal {
		t.Errorf("the call whose charge failed: %+v, %v; want the local fallback's admission (its 100th)", r, err)
	}
	backOnStore(t, l) // the failed charge opened the breaker (FailureThreshold 1)
	r, err = l.Allow(ctx, "k", lim)
	if err != nil || r.Allowed || r.Source != redlimit.FromStore {
		t.Errorf("the next call: %+v, %v; want the store's denial, the debt charged", r, err)
	}
	// The 100th unit, admitted locally after the charge failed, is owed
	// apart and charged with the next call, with an id of its own.
	calls := fs.charges()
	if len(calls) != 3 || calls[0].id == "" || calls[0].err == nil || calls[1] != (chargeCall{calls[0].id, 99, nil}) ||
		calls[2].id == "" || calls[2].id == calls[0].id || calls[2].cost != 1 || calls[2].err != nil {
		t.Errorf("charges %+v: want 99 failed, 99 again with its id, then 1 with another", calls)
	}
	if rc, want := l.Reconciliation(), (resilient.Reconciliation{Charged: 100, Unconfirmed: 99, Recovered: 99}); rc != want {
		t.Errorf("reconciliation: %+v, want %+v", rc, want)
	}
}

// atMostOnce is a store without DebitOnce.
type atMostOnce struct{ redlimit.Limiter }

// lostReply is a store whose debits are applied but whose replies are lost
// (an error instead), as when the connection drops after the call was sent.
type lostReply struct{ redlimit.Limiter }

func (s lostReply) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	d, err := s.Limiter.AllowAll(ctx, reqs)
	if err == nil && hasDebit(reqs) {
		return redlimit.Decision{}, errors.New("test: reply lost")
	}
	return d, err
}

func hasDebit(reqs []redlimit.Request) bool {
	return slices.ContainsFunc(reqs, func(r redlimit.Request) bool { return r.Debit })
}

// TestReconcileChargesAtMostOnce: with a store that cannot count a debit
// once per id (no DebitOnce), a charge whose reply is lost is not made
// again (it may have been applied, as here): counted as unconfirmed.
func TestReconcileChargesAtMostOnce(t *testing.T) {
	t.Parallel()
	l, srv, store := outageLimiter(t, resilient.Options{Reconcile: resilient.ReconcileOptions{Spread: -1}}, func(s redlimit.Limiter) redlimit.Limiter { return lostReply{s} })
	ctx := context.Background()
	lim := redlimit.PerHour(100).FixedWindow()
	freeze(t, srv, l)
	admitLocally(t, l, "k", lim, 30)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	backOnStore(t, l)
	waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 })
	for range 3 {
		backOnStore(t, l)
	}
	time.Sleep(100 * time.Millisecond)
	rc := l.Reconciliation()
	if rc != (resilient.Reconciliation{Unconfirmed: 30}) {
		t.Errorf("reconciliation: %+v, want 30 units lost", rc)
	}
	// Peek's Remaining is what would be left after one more.
	if r, err := store.Peek(ctx, "k", lim, 1); err != nil || r.Remaining != 69 {
		t.Errorf("Redis counts %d of 100 used (%v), want 30: charged once", 99-r.Remaining, err)
	}
}

// TestReconcileIsBounded: the states owed are bounded; units of the states
// beyond the bound are counted as dropped, the others charged.
func TestReconcileIsBounded(t *testing.T) {
	t.Parallel()
	l, srv, _ := outageLimiter(t, resilient.Options{Reconcile: resilient.ReconcileOptions{Size: 16, Spread: -1}}, nil)
	lim := redlimit.PerHour(100).SlidingLog()
	freeze(t, srv, l)
	before := l.Reconciliation()
	for i := range 200 {
		admitLocally(t, l, fmt.Sprint("k", i), lim, 1)
	}
	rc := l.Reconciliation()
	if rc.Owed < 1 || rc.Owed > 16 || int(rc.Dropped-before.Dropped)+rc.Owed-before.Owed != 200 {
		t.Errorf("after 200 states admitted locally, bound 16: %+v (before %+v)", rc, before)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	backOnStore(t, l)
	waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 })
	// Every state held charged, once (a try whose reply was lost on a
	// loaded machine is sent again with its id, and counted in Charged
	// once it is confirmed).
	if got := l.Reconciliation(); got.Charged != int64(rc.Owed) || got.Owed != 0 || got.Dropped != rc.Dropped {
		t.Errorf("charged %+v, want the %d states held", got, rc.Owed)
	}
}

// recording records the times and sizes of the debit calls to a store.
type recording struct {
	redlimit.Limiter
	mu    sync.Mutex
	calls []debitCall
}

type debitCall struct {
	at    time.Time
	reqs  int
	units int64
}

func (s *recording) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if hasDebit(reqs) {
		c := debitCall{at: time.Now(), reqs: len(reqs)}
		for _, r := range reqs {
			c.units += r.Cost
		}
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
	}
	return s.Limiter.AllowAll(ctx, reqs)
}

// TestReconcileSpreadsBatches: nodes that come back together charge in
// batches of at most MaxRequests states, each node after a random wait up
// to Reconcile.Spread, not all at once.
func TestReconcileSpreadsBatches(t *testing.T) {
	t.Parallel()
	const nodes, states, spread = 12, 150, 600 * time.Millisecond
	srv := redistest.Start(t)
	recs := make([]*recording, nodes)
	ls := make([]*resilient.Limiter, nodes)
	for i := range ls {
		recs[i] = &recording{Limiter: redisStore(t, []string{srv.Addr()})}
		// A charge that times out opens the breaker (threshold 1), and this
		// store has no DebitOnce, so it is not sent again: a second's
		// timeout keeps a loaded machine (load average 20) from that.
		ls[i] = newLimiter(t, recs[i], resilient.Options{Timeout: time.Second, Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: 500 * time.Millisecond}, Reconcile: resilient.ReconcileOptions{Spread: spread}})
	}
	ctx := context.Background()
	lim := redlimit.PerHour(1000).SlidingWindow()
	freeze(t, srv, ls...)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for i := range states {
				if r, err := l.Allow(ctx, fmt.Sprint("k", i), lim); err != nil || r.Source != redlimit.FromLocal {
					t.Errorf("%+v, %v", r, err)
				}
			}
		})
	}
	wg.Wait()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	back := make([]time.Time, nodes)
	for i, l := range ls {
		wg.Go(func() { backOnStore(t, l); back[i] = time.Now() })
	}
	wg.Wait()
	for _, l := range ls {
		if !waitFor(10*time.Second, func() bool { return l.Reconciliation().Owed == 0 }) {
			t.Fatalf("still owed: %+v", l.Reconciliation())
		}
	}
	var lo, hi time.Duration
	for i, rec := range recs {
		rec.mu.Lock()
		calls := slices.Clone(rec.calls)
		rec.mu.Unlock()
		var units int64
		for _, c := range calls {
			units += c.units
			if c.reqs > redlimit.MaxRequests {
				t.Errorf("node %d: a charge of %d states", i, c.reqs)
			}
		}
		if rc := ls[i].Reconciliation(); units != states || rc.Charged != units || rc.Unconfirmed != 0 {
			t.Errorf("node %d: %d units in %d calls, %+v; want %d", i, units, len(calls), rc, states)
		}
		if len(calls) < (states+redlimit.MaxRequests-1)/redlimit.MaxRequests {
			t.Errorf("node %d: %d calls", i, len(calls))
			continue
		}
		wait := calls[0].at.Sub(back[i])
		if wait > spread+time.Second {
			t.Errorf("node %d: first charge %s after the store came back, spread %s", i, wait, spread)
		}
		if i == 0 || wait < lo {
			lo = wait
		}
		if i == 0 || wait > hi {
			hi = wait
		}
	}
	t.Logf("first charges %s to %s after the store came back", lo, hi)
	// 12 uniform waits in [0, 600 ms) all fall within 150 ms with
	// probability below 1e-5.
	if hi-lo < spread/4 {
		t.Errorf("first charges within %s of each other: not spread", hi-lo)
	}
}
