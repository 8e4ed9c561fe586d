package resilient_test

import (
	"context"
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
		l := newLimiter(t, store, resilient.Options{FailureThreshold: threshold, Timeout: time.Second})
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
