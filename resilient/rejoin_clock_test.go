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
	"github.com/redlimit/redlimit/resilient"
)

// TestNoRejoinWithoutAnOutageClockBehindStart: a node that never saw an
// outage does not rejoin, even when its clock (Options.Now, a wall clock
// without a monotonic reading, such as time.Now().UTC()) reads earlier
// than when the Limiter was made: an NTP step back right after start.
func TestNoRejoinWithoutAnOutageClockBehindStart(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	var back atomic.Int64
	now := func() time.Time { return time.Now().UTC().Add(-time.Duration(back.Load())) }
	l := newLimiter(t, redisStore(t, []string{srv.Addr()}), resilient.Options{Nodes: fixedNodes(2), Now: now, Timeout: time.Second})
	back.Store(int64(time.Minute))
	lim := redlimit.PerHour(10).SlidingLog()
	key := fmt.Sprint("k", rand.Uint64())
	admitted := 0
	for range 10 {
		r, err := l.Allow(context.Background(), key, lim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		} else {
			t.Logf("denied: %+v", r)
		}
	}
	if admitted != 10 {
		t.Errorf("%d of 10 admitted on a healthy store, never failed; want all 10", admitted)
	}
}

// TestRejoinEndsClockBehindStart: a node whose clock reads earlier than
// when the Limiter was made (a wall clock without a monotonic reading,
// stepped back) rejoins after an outage for Rejoin, not for ever: the
// rejoin's end, measured from the Limiter's start, is negative there,
// and must not overflow to the largest instant.
func TestRejoinEndsClockBehindStart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var back atomic.Int64
	now := func() time.Time { return time.Now().UTC().Add(-time.Duration(back.Load())) }
	var down atomic.Bool
	const rejoin = 200 * time.Millisecond
	a := rejoiningNode(t, srv, nil, &down, resilient.Options{Nodes: fixedNodes(2), Now: now, Fallback: resilient.FallbackOptions{Rejoin: rejoin}})
	back.Store(int64(time.Hour))
	lim := redlimit.PerHour(2).SlidingLog()
	down.Store(true)
	admitLocally(t, a, fmt.Sprint("k", rand.Uint64()), lim, 1) // the breaker opens
	down.Store(false)
	backOnStore(t, a) // rejoining for 200 ms from here
	time.Sleep(rejoin + 100*time.Millisecond)
	key := fmt.Sprint("k", rand.Uint64())
	for i := range 2 {
		r, err := a.Allow(context.Background(), key, lim)
		if err != nil || !r.Allowed || r.Source != redlimit.FromStore {
			t.Fatalf("request %d of 2, %s after the outage: %+v, %v; want admitted by Redis, the rejoin over", i+1, rejoin+100*time.Millisecond, r, err)
		}
	}
}
