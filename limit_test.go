package redlimit_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestEmissionInterval checks the token bucket's time per token, and the
// refill rates the TokenBucket documentation states.
func TestEmissionInterval(t *testing.T) {
	tests := []struct {
		count  int64
		period time.Duration
		want   int64 // µs
	}{
		{3, time.Second, 333_334},
		{100, time.Minute, 600_000},
		{10_000, time.Second, 100},
		{30_000, time.Second, 34},
		{300_000, time.Second, 4}, // refills at 250,000 per second
		{1_000_000, time.Second, 1},
		{10_000_000, time.Second, 1}, // refills at 1,000,000 per second
	}
	for _, tt := range tests {
		l := redlimit.Limit{Algorithm: redlimit.TokenBucket, Count: tt.count, Period: tt.period, Burst: 1}
		if got := l.EmissionInterval(); got != tt.want {
			t.Errorf("%d per %s: emission interval %d µs, want %d", tt.count, tt.period, got, tt.want)
		}
	}
	// Up to 10,000 per second the bucket refills at least 99% as fast as
	// its rate, and never faster.
	for count := int64(1); count <= 10_000; count++ {
		l := redlimit.Limit{Algorithm: redlimit.TokenBucket, Count: count, Period: time.Second, Burst: 1}
		rate := 1e6 / float64(l.EmissionInterval())
		if rate > float64(count) || rate < 0.99*float64(count) {
			t.Fatalf("%d per second refills at %.1f per second", count, rate)
		}
	}
}
