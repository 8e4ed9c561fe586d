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

// TestEnvoyDeadlineGetsPolicyAnswer: with the default --timeout (50 ms)
// above Envoy's 20 ms, a call whose Redis hangs gets the failure policy's
// answer within its 20 ms deadline, not a deadline exceeded
// (docs/OPERATIONS.md, "Timeouts"). On a busy host a call may still miss
// its deadline, so most calls must be answered, not all.
func TestEnvoyDeadlineGetsPolicyAnswer(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1000))
	r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr()})
	r.decide(t, "ip", "1") // connected
	if err := redis.Pause(); err != nil {
		t.Fatal(err)
	}
	defer redis.Resume()
	const calls = 20
	answered := 0
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: fmt.Sprint(i)}}}}}
		if _, err := r.client.ShouldRateLimit(ctx, req); err == nil {
			answered++
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d of %d calls answered within 20 ms", answered, calls)
	if answered < calls/2 {
		t.Fatalf("%d of %d calls answered within 20 ms by the failure policy, want most", answered, calls)
	}
}
