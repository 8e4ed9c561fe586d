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

// slowReconnect is a store whose first call after it was down takes dial
// before it is made (a new connection: dial, handshake, scripts loaded
// again, on a host starved of CPU), cut off, as a dial is, by the call's
// context.
type slowReconnect struct {
	redlimit.Limiter
	down, connected atomic.Bool
	dial            time.Duration
}

func (s *slowReconnect) connect(ctx context.Context) error {
	if s.down.Load() {
		s.connected.Store(false)
		return errDown
	}
	if s.connected.Load() {
		return nil
	}
	t := time.NewTimer(s.dial)
	defer t.Stop()
	select {
	case <-t.C:
		s.connected.Store(true)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dial: %w", ctx.Err())
	}
}

func (s *slowReconnect) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := s.connect(ctx); err != nil {
		return redlimit.Result{}, err
	}
	return s.Limiter.AllowN(ctx, key, l, n)
}

func (s *slowReconnect) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if err := s.connect(ctx); err != nil {
		return redlimit.Decision{}, err
	}
	return s.Limiter.AllowAll(ctx, reqs)
}

func (s *slowReconnect) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := s.connect(ctx); err != nil {
		return redlimit.Result{}, err
	}
	return s.Limiter.Peek(ctx, key, l, n)
}

// TestFaultProbeOutlastsASlowReconnect: Redis is back, but the first call
// to it takes longer than Options.Timeout (a new connection on a host
// starved of CPU), though less than the breaker's cool-down. The probe
// waits for it (docs/RELIABILITY.md, the deadline) and the breaker
// closes. A probe cut off at Timeout leaves the next one to dial afresh,
// and the breaker never closes.
func TestFaultProbeOutlastsASlowReconnect(t *testing.T) {
	t.Parallel()
	store := &slowReconnect{Limiter: redisStore(t, []string{redistest.Shared(t).Addr()}), dial: 3 * resilient.DefaultTimeout}
	store.connected.Store(true)
	l := newLimiter(t, store, resilient.Options{Breaker: resilient.BreakerOptions{FailureThreshold: 1}})
	lim := redlimit.PerHour(1000).OnFailure(redlimit.FailOpen)
	key := fmt.Sprint("k", rand.Uint64())
	store.down.Store(true)
	if r, err := l.Allow(context.Background(), key, lim); err != nil || r.Source != redlimit.FromFailOpen {
		t.Fatalf("Redis down: %+v, %v", r, err)
	}
	store.down.Store(false)
	back := time.Now()
	if !waitFor(10*resilient.DefaultCoolDown, func() bool {
		r, err := l.Allow(context.Background(), key, lim)
		return err == nil && r.Source == redlimit.FromStore
	}) {
		t.Fatalf("decisions not back on Redis %s after it was back, breaker %s", time.Since(back), l.BreakerState())
	}
}
