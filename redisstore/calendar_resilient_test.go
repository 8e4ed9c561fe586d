package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestClockSkewIsNotAnOutage: a host a day or more from Redis's clock gets
// ErrClockSkew for its calendar decisions through resilient, as from the
// store. It is this host's fault, not Redis's: no failure policy answers
// it, the breaker stays closed, and the host's other limits are still
// decided by Redis.
func TestClockSkewIsNotAnOutage(t *testing.T) {
	ctx := context.Background()
	day := redlimit.PerCalendar(5, redlimit.Day, "").OnFailure(redlimit.FailOpen)
	hour := redlimit.PerHour(3)
	for _, d := range deployments[:3] {
		t.Run(d.name, func(t *testing.T) {
			s := d.store(t, redisstore.WithPrefix(prefix(t)),
				redisstore.WithHostClock(func() time.Time { return time.Now().Add(72 * time.Hour) }))
			l, err := resilient.New(s, resilient.Options{Timeout: 5 * time.Second, Breaker: resilient.BreakerOptions{FailureThreshold: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for range 4 {
				res, err := l.AllowN(ctx, "k", day, 1)
				if !errors.Is(err, redlimit.ErrClockSkew) {
					t.Fatalf("calendar AllowN: %+v, %v; want ErrClockSkew", res, err)
				}
			}
			if st := l.BreakerState(); st != "closed" {
				t.Fatalf("breaker %s after clock-skewed decisions; want closed", st)
			}
			for i := range 4 {
				res, err := l.AllowN(ctx, "k", hour, 1)
				if err != nil || res.Source != redlimit.FromStore || res.Allowed != (i < 3) {
					t.Fatalf("hourly decision %d: %+v, %v; want Redis's answer", i, res, err)
				}
			}
		})
	}
}
