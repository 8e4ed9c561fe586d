package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
)

// TestEnvoyDeadlineGetsPolicyAnswer: with --timeout above the caller's
// deadline, a call whose Redis hangs gets the failure policy's answer
// within its deadline, not a deadline exceeded (docs/OPERATIONS.md,
// "Timeouts"). Envoy's case is a 20 ms deadline under a 50 ms --timeout.
// The test scales both by ten, so a busy 2-core host's scheduling delays
// stay within the margin. Most calls must be answered, not all.
func TestEnvoyDeadlineGetsPolicyAnswer(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1000))
	const deadline = 200 * time.Millisecond
	r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), Timeout: 500 * time.Millisecond})
	r.decide(t, "ip", "1") // connected
	if err := redis.Pause(); err != nil {
		t.Fatal(err)
	}
	defer redis.Resume()
	const calls = 20
	answered := 0
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: fmt.Sprint(i)}}}}}
		if _, err := r.client.ShouldRateLimit(ctx, req); err == nil {
			answered++
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d of %d calls answered within %v", answered, calls, deadline)
	if answered < calls/2 {
		t.Fatalf("%d of %d calls answered within %v by the failure policy, want most", answered, calls, deadline)
	}
}
