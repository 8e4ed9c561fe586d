package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestBreakerStateOneAtATime: each scrape shows exactly one state at 1,
// even when the state changes while the scrape reads it (here at every
// reading). With a gauge per state, each reading the state, a scrape
// across a transition showed two.
func TestBreakerStateOneAtATime(t *testing.T) {
	states := []string{"closed", "open", "half-open"}
	n := 0
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg, func() string { n++; return states[n%len(states)] }); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, f := range families {
			if f.GetName() == "redlimit_breaker_state" {
				for _, m := range f.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
		if sum != 1 {
			t.Fatalf("a scrape shows %v states at 1, want 1", sum)
		}
	}
}
