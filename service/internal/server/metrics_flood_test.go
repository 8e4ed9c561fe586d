package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// A client flooding a detailed_metric rule with distinct long values (1,100
// requests of 65,000-byte values made /metrics 65.6 MB) leaves /metrics
// small: labels are cut to rls.MaxDetailedLabelBytes, and a rule takes at
// most rls.DefaultMaxDetailedSeriesPerRule of them.
func TestMetricsSizeUnderDetailedFlood(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, `domain: web
descriptors:
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000000}
`)
	r := start(t, Options{ConfigPath: path})
	_, before := r.getBody(t, "/metrics")
	value := strings.Repeat("v", 65_000)
	for i := range 1_100 {
		req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprintf("%04d%s", i, value)}},
		}}}
		if _, err := r.client.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	_, after := r.getBody(t, "/metrics")
	const most = 256 << 10
	if grown := len(after) - len(before); grown > most {
		t.Fatalf("/metrics grew by %d bytes, above %d", grown, most)
	}
	if n := strings.Count(after, `rule="web.user_`); n > 100 {
		t.Errorf("%d detailed series", n)
	}
	if !strings.Contains(after, `redlimit_rls_decisions_total{domain="web",outcome="allowed",rule="web.user"} 1000`) {
		t.Errorf("the overflow series does not count the 1,000 descriptors past the cap")
	}
	t.Logf("/metrics: %d bytes before, %d after", len(before), len(after))
}
