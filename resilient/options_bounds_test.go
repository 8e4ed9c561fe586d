package resilient_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// TestHugeFailureThresholdNeverTrips: a FailureThreshold beyond any run of
// failures a test can make keeps the breaker closed; one past what 32 bits
// hold is not cut to 0 (which would open it at the first failure).
func TestHugeFailureThresholdNeverTrips(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	store := switchable{redisStore(t, []string{redistest.Shared(t).Addr()}), &down}
	for _, threshold := range []int{1 << 32, 1<<32 + 1} {
		l := newLimiter(t, store, resilient.Options{Breaker: resilient.BreakerOptions{FailureThreshold: threshold}, Timeout: time.Second})
		for range 3 {
			if _, err := l.Allow(context.Background(), "k", redlimit.PerHour(10)); err != nil {
				t.Fatal(err)
			}
		}
		if s := l.BreakerState(); s != "closed" {
			t.Errorf("FailureThreshold %d: breaker %s after 3 failures, want closed", threshold, s)
		}
	}
}

// hung is a store whose calls never answer before their context ends.
type hung struct{ redlimit.Limiter }

func (hung) AllowN(ctx context.Context, _ string, _ redlimit.Limit, _ int64) (redlimit.Result, error) {
	<-ctx.Done()
	return redlimit.Result{}, ctx.Err()
}

func (hung) AllowAll(ctx context.Context, _ []redlimit.Request) (redlimit.Decision, error) {
	<-ctx.Done()
	return redlimit.Decision{}, ctx.Err()
}

// TestSubMillisecondTimeoutOpensTheBreaker: a store that does not answer
// within Options.Timeout has failed, and the breaker counts it, even when
// that Timeout is under a millisecond: only a caller's deadline that
// leaves less is too short to judge the store by (Options.Timeout's
// doc). Else a hung store never opens the breaker of such a Limiter: every
// call waits its Timeout, and no outage is seen, so no rejoin follows.
func TestSubMillisecondTimeoutOpensTheBreaker(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, hung{redisStore(t, []string{redistest.Shared(t).Addr()})}, resilient.Options{Timeout: 500 * time.Microsecond, Breaker: resilient.BreakerOptions{FailureThreshold: 3}})
	for range 5 {
		if _, err := l.Allow(context.Background(), "k", redlimit.PerHour(10)); err != nil {
			t.Fatal(err)
		}
	}
	if s := l.BreakerState(); s != "open" {
		t.Errorf("breaker %s after 5 calls unanswered within the 500µs Timeout, FailureThreshold 3; want open", s)
	}
}

// TestHugeNodeCountKeepsAShare: whatever the NodeCounter says, a node's
// share of a limit is at least one request (ceil(count / nodes)), and a
// decision during an outage is answered, not failed: a count near the
// int's bound must not overflow the rounding up.
func TestHugeNodeCountKeepsAShare(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	for _, nodes := range []int{0, -5, 1 << 40, math.MaxInt - 5, math.MaxInt} {
		l := newLimiter(t, switchable{redisStore(t, []string{redistest.Shared(t).Addr()}), &down}, resilient.Options{Nodes: fixedNodes(nodes), Timeout: time.Second})
		for _, lim := range []redlimit.Limit{redlimit.PerHour(100), redlimit.PerHour(100).TokenBucket(100), redlimit.PerHour(100_000).SlidingLog(), redlimit.PerHour(redlimit.MaxCount)} {
			r, err := l.Allow(context.Background(), fmt.Sprint("k", nodes, lim), lim)
			if err != nil || !r.Allowed || r.Source != redlimit.FromLocal {
				t.Errorf("Nodes %d, %v: %+v, %v; want the local share's admission", nodes, lim, r, err)
			}
		}
	}
}
