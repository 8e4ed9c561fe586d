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
				// The steps jump through time faster than Redis's TTLs run
				// out: the margin keeps state for the whole run.
				return d.store(t, redisstore.WithClock(now), redisstore.WithTTLMargin(time.Minute), redisstore.WithPrefix(prefix(t)))
			})
		})
	}
	// Every single-limit decision through the batch script, as a batch of
	// one.
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run("batch-script/"+d.name, func(t *testing.T) {
			t.Parallel()
			redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
				return d.store(t, redisstore.WithClock(now), redisstore.WithTTLMargin(time.Minute), redisstore.WithPrefix(prefix(t)), redisstore.WithBatchScriptAlways())
			})
		})
	}
}
