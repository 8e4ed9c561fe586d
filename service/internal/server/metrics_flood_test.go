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
// most rls.DefaultMaxDetailedSeriesPerRule of them. The flood does not keep
// its labels from a value sent often after it: that value gets a series,
// one of the flood's is deleted, and /metrics stays as small.
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
	send := func(v string) {
		req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: v}},
		}}}
		if _, err := r.client.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1_100 {
		send(fmt.Sprintf("%04d%s", i, value))
	}
	_, after := r.getBody(t, "/metrics")
	const most = 256 << 10
	check := func(after string) {
		t.Helper()
		if grown := len(after) - len(before); grown > most {
			t.Fatalf("/metrics grew by %d bytes, above %d", grown, most)
		}
		if n := strings.Count(after, `rule="web.user_`); n > 100 {
			t.Errorf("%d detailed series", n)
		}
	}
	check(after)
	if !strings.Contains(after, `redlimit_rls_decisions_total{domain="web",outcome="allowed",rule="web.user"} 1000`) {
		t.Errorf("the overflow series does not count the 1,000 descriptors past the cap")
	}
	for i := range 50 { // a heavy value, the flood going on at ten times its rate
		for j := range 10 {
			send(fmt.Sprintf("x%04d%s", 10*i+j, value))
		}
		send("heavy" + value)
	}
	_, heavy := r.getBody(t, "/metrics")
	check(heavy)
	if !strings.Contains(heavy, `rule="web.user_heavyvvvv`) {
		t.Errorf("the heavy value has no series of its own")
	}
	t.Logf("/metrics: %d bytes before, %d after the flood, %d after the heavy value", len(before), len(after), len(heavy))
}
