package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// downStore is a redisstore.Store (a Refunder with DebitOnce) whose calls
// all fail while down is set.
type downStore struct {
	*redisstore.Store
	down *atomic.Bool
}

func (s downStore) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.down.Load() {
		return redlimit.Result{}, errDown
	}
	return s.Store.AllowN(ctx, key, l, n)
}

func (s downStore) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s.down.Load() {
		return redlimit.Decision{}, errDown
	}
	return s.Store.AllowAll(ctx, reqs)
}

func (s downStore) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if s.down.Load() {
		return redlimit.Result{}, errDown
	}
	return s.Store.Peek(ctx, key, l, n)
}

func (s downStore) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Store.Admit(ctx, reqs)
}

func (s downStore) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Refund(ctx, g, back)
}

func (s downStore) DebitOnce(ctx context.Context, req redlimit.Request, id string) (redlimit.Result, bool, error) {
	if s.down.Load() {
		return redlimit.Result{}, false, errDown
	}
	return s.Store.DebitOnce(ctx, req, id)
}

// TestAdmitDuringOutageIsOwed: what the local fallback admitted through
// Admit (package reserve) while the store failed is owed to the store, as
// what it admitted through Allow is (docs/RELIABILITY.md, "What is owed":
// the admissions the local fallback allowed): once the store is back it
// must not admit the limit again in the same window.
func TestAdmitDuringOutageIsOwed(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for _, admit := range []bool{false, true} {
		t.Run(fmt.Sprint("admit=", admit), func(t *testing.T) {
			ctx := context.Background()
			var down atomic.Bool
			l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down},
				resilientOpts())
			lim := redlimit.PerHour(10).SlidingLog()
			key := fmt.Sprint("k", rand.Uint64())
			decide := func() redlimit.Result {
				if admit {
					g, err := l.Admit(ctx, []redlimit.Request{{Key: key, Limit: lim, Cost: 1}})
					if err != nil {
						t.Fatal(err)
					}
					return g.Decision.Results[0]
				}
				r, err := l.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			down.Store(true)
			for i := range 10 {
				if r := decide(); !r.Allowed || r.Source != redlimit.FromLocal {
					t.Fatalf("local admission %d: %+v", i, r)
				}
			}
			down.Store(false)
			backOnStore(t, l)
			waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 })
			again := 0
			for range 20 {
				if decide().Allowed {
					again++
				}
			}
			if again != 0 {
				t.Errorf("10 admitted locally during the outage, then %d more by the store within the hour (limit 10); reconciliation %+v", again, l.Reconciliation())
			}
		})
	}
}

func resilientOpts() resilient.Options {
	return resilient.Options{Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: 20 * time.Millisecond}, Reconcile: resilient.ReconcileOptions{Spread: -1}, Timeout: time.Second}
}

// TestAdmitDuringOutageRefundIsNotOwed: what a Refund gives back of the
// local fallback's Admit during the outage is no longer owed: the store is
// charged the rest only.
func TestAdmitDuringOutageRefundIsNotOwed(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	ctx := context.Background()
	var down atomic.Bool
	l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down}, resilientOpts())
	lim := redlimit.PerHour(10).SlidingLog()
	key := fmt.Sprint("k", rand.Uint64())
	down.Store(true)
	g, err := l.Admit(ctx, []redlimit.Request{{Key: key, Limit: lim, Cost: 8}})
	if err != nil || !g.Allowed || g.Results[0].Source != redlimit.FromLocal {
		t.Fatalf("local admission: %+v, %v", g, err)
	}
	if err := l.Refund(ctx, g, []int64{5}); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	backOnStore(t, l)
	if !waitFor(5*time.Second, func() bool { return l.Reconciliation().Owed == 0 }) {
		t.Fatalf("still owed: %+v", l.Reconciliation())
	}
	if rc := l.Reconciliation(); rc.Charged != 3 {
		t.Errorf("reconciliation %+v: want the 3 kept of 8 charged", rc)
	}
}

// TestResetDropsWhatIsOwed: a Reset of a key on this node resets it in
// the store, the fallback and the caches, and drops what this node owes
// for it: else the debt of an outage before the Reset is charged to the
// key just reset, and its clients denied what the Reset gave them.
func TestResetDropsWhatIsOwed(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	ctx := context.Background()
	var down atomic.Bool
	opts := resilientOpts()
	opts.Reconcile.Spread = time.Hour // no charge in the background during the test
	l := newLimiter(t, downStore{redisStore(t, []string{srv.Addr()}), &down}, opts)
	lim := redlimit.PerHour(10).SlidingLog()
	key := fmt.Sprint("k", rand.Uint64())
	down.Store(true)
	admitLocally(t, l, key, lim, 5)
	down.Store(false)
	backOnStore(t, l)
	if err := l.Reset(ctx, key, lim); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 12 {
		r, err := l.Allow(ctx, key, lim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("%d admitted after a Reset, want the limit of 10; reconciliation %+v", admitted, l.Reconciliation())
	}
}
