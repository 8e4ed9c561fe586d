package redisstore_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

func TestConformance(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
				return d.store(t, redisstore.WithClock(now), redisstore.WithPrefix(prefix(t)))
			})
		})
	}
}
