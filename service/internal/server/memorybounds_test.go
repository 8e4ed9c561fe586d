package server

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
)

// TestMemoryBounds: MemoryMaxKeys bounds the memory store (without Redis)
// and the local fallback (with Redis). A full store of states still in use
// denies new keys, keeps deciding the keys it holds, and counts the refusals.
func TestMemoryBounds(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 5))

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		r := start(t, Options{ConfigPath: path, MemoryMaxKeys: 3})
		for i := range 3 {
			if got := r.decide(t, "ip", fmt.Sprint("10.0.0.", i)).OverallCode; got != pb.RateLimitResponse_OK {
				t.Fatalf("key %d of 3: %s", i, got)
			}
		}
		if got := r.decide(t, "ip", "10.0.0.9").OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a fourth key in a store of 3 in use: %s, want OVER_LIMIT", got)
		}
		if got := r.decide(t, "ip", "10.0.0.1").OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("a key the full store holds: %s, want OK", got)
		}
		for series, want := range map[string]float64{"redlimit_memory_refused_total": 1, "redlimit_memory_states": 3} {
			if got := r.metric(t, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})
	t.Run("fallback", func(t *testing.T) {
		t.Parallel()
		redis := redistest.Start(t)
		r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), MemoryMaxKeys: 3, Timeout: 20 * time.Millisecond})
		if got := r.metric(t, "redlimit_memory_states"); got != 0 {
			t.Fatalf("the fallback holds %v states before any outage", got)
		}
		// Redis hangs: the rule's failure policy (local) decides in the
		// fallback, which holds 3 states at most.
		if err := redis.Pause(); err != nil {
			t.Fatal(err)
		}
		defer redis.Resume()
		for i := range 3 {
			if got := r.decide(t, "ip", fmt.Sprint("10.0.1.", i)).OverallCode; got != pb.RateLimitResponse_OK {
				t.Fatalf("key %d of 3 in the fallback: %s", i, got)
			}
		}
		if got := r.decide(t, "ip", "10.0.1.9").OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a fourth key in a fallback of 3 in use: %s, want OVER_LIMIT", got)
		}
		if got := r.metric(t, "redlimit_memory_refused_total"); got != 1 {
			t.Errorf("fallback refusals = %v, want 1", got)
		}
	})
}
