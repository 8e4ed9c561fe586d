package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/reserve"
	"github.com/redlimit/redlimit/resilient"
)

// TestRefundClearsTheDenyCache: a refund through the Limiter (its own
// Refund, reserve's Release, a Settle below the estimate) drops the cached
// denials of every key it gives back to, as a Reset does. Else the cache
// denies until the old retry-after (up to the hour here) what the store
// allows.
func TestRefundClearsTheDenyCache(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	limits := []redlimit.Limit{
		redlimit.PerHour(10).FixedWindow(),
		redlimit.PerHour(10).SlidingWindow(),
		redlimit.PerHour(10).SlidingLog(),
		redlimit.PerHour(10).TokenBucket(10),
	}
	refunds := []struct {
		name   string
		refund func(ctx context.Context, l *resilient.Limiter, keys []string, lim redlimit.Limit) (exhausted func() error)
	}{
		{"Refund", func(ctx context.Context, l *resilient.Limiter, keys []string, lim redlimit.Limit) func() error {
			g, err := l.Admit(ctx, []redlimit.Request{{Key: keys[0], Limit: lim, Cost: 10}, {Key: keys[1], Limit: lim, Cost: 10}})
			if err != nil || !g.Allowed {
				return func() error { return fmt.Errorf("admit: %+v, %v", g, err) }
			}
			return func() error { return l.Refund(ctx, g, []int64{3, 3}) }
		}},
		{"Release", func(ctx context.Context, l *resilient.Limiter, keys []string, lim redlimit.Limit) func() error {
			r, err := ledger(t, l).ReserveAll(ctx, []redlimit.Request{{Key: keys[0], Limit: lim, Cost: 10}, {Key: keys[1], Limit: lim, Cost: 10}})
			if err != nil || !r.OK() {
				return func() error { return fmt.Errorf("reserve: %v", err) }
			}
			return func() error { return r.Release(ctx) }
		}},
		{"Settle below", func(ctx context.Context, l *resilient.Limiter, keys []string, lim redlimit.Limit) func() error {
			r, err := ledger(t, l).ReserveAll(ctx, []redlimit.Request{{Key: keys[0], Limit: lim, Cost: 10}, {Key: keys[1], Limit: lim, Cost: 10}})
			if err != nil || !r.OK() {
				return func() error { return fmt.Errorf("reserve: %v", err) }
			}
			return func() error { return r.Settle(ctx, 7) }
		}},
	}
	for _, lim := range limits {
		for _, c := range refunds {
			t.Run(fmt.Sprint(lim, "/", c.name), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Timeout: 5 * time.Second})
				keys := []string{fmt.Sprint("a", rand.Uint64()), fmt.Sprint("b", rand.Uint64())}
				refund := c.refund(ctx, l, keys, lim)
				for _, k := range keys {
					if r, err := l.Allow(ctx, k, lim); err != nil || r.Allowed || r.Source != redlimit.FromStore {
						t.Fatalf("%s exhausted: %+v, %v; want the store's denial", k, r, err)
					}
					if r, err := l.Allow(ctx, k, lim); err != nil || r.Allowed || r.Source != redlimit.FromDenyCache {
						t.Fatalf("%s exhausted again: %+v, %v; want the cached denial", k, r, err)
					}
				}
				if err := refund(); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if r, err := l.Allow(ctx, k, lim); err != nil || !r.Allowed || r.Source != redlimit.FromStore {
						t.Errorf("%s after the refund: %+v, %v; want the store's admission", k, r, err)
					}
				}
			})
		}
	}
}

// ledger returns a Ledger on l, closed at the end of the test.
func ledger(t *testing.T, l *resilient.Limiter) *reserve.Ledger {
	t.Helper()
	led, err := reserve.New(l, reserve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return led
}

// heldDenials is a Refunder store whose denials of AllowN are held, after
// the store made them, until release is closed.
type heldDenials struct {
	redlimit.Refunder
	held    chan struct{} // closed when a denial is held
	release chan struct{}
}

func (s *heldDenials) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	r, err := s.Refunder.AllowN(ctx, key, l, n)
	if err == nil && !r.Allowed {
		close(s.held)
		<-s.release
	}
	return r, err
}

// TestDenialBeforeARefundIsNotCached: a denial the store made before a
// refund, whose answer arrives after the refund, is not cached: it says
// nothing of the state the refund left.
func TestDenialBeforeARefundIsNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &heldDenials{Refunder: redisStore(t, []string{redistest.Shared(t).Addr()}), held: make(chan struct{}), release: make(chan struct{})}
	l := newLimiter(t, store, resilient.Options{Timeout: 5 * time.Second})
	lim := redlimit.PerHour(10).SlidingLog()
	key := fmt.Sprint("k", rand.Uint64())
	g, err := l.Admit(ctx, []redlimit.Request{{Key: key, Limit: lim, Cost: 10}})
	if err != nil || !g.Allowed {
		t.Fatalf("admit: %+v, %v", g, err)
	}
	denied := make(chan redlimit.Result, 1)
	go func() {
		r, err := l.Allow(ctx, key, lim)
		if err != nil {
			t.Error(err)
		}
		denied <- r
	}()
	<-store.held
	if err := l.Refund(ctx, g, []int64{1}); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if r := <-denied; r.Allowed || r.Source != redlimit.FromStore {
		t.Fatalf("the held decision: %+v, want the store's denial", r)
	}
	if r, err := l.Allow(ctx, key, lim); err != nil || !r.Allowed || r.Source != redlimit.FromStore {
		t.Errorf("after the refund: %+v, %v; want the store's admission", r, err)
	}
}
