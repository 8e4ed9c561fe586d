package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// lazyRules has a local rule (the default policy) and a fail_closed one.
const lazyRules = `domain: web
descriptors:
  - key: ip
    rate_limit:
      unit: hour
      requests_per_unit: 2
      algorithm: fixed_window
  - key: closed
    rate_limit:
      unit: hour
      requests_per_unit: 100
      failure_policy: fail_closed
`

// A server started while Redis is down serves: each rule's failure policy
// answers and /readyz says why it is not ready. Once Redis starts, it gets
// ready and decisions go to Redis, without a restart.
func TestServeStartsWhileRedisDown(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	if err := redis.Kill(); err != nil { // its port, chosen before
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, lazyRules)
	r := startNotReady(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), Timeout: 50 * time.Millisecond})

	code, body := r.getBody(t, "/readyz")
	if code != 503 || !strings.Contains(body, "redis") {
		t.Fatalf("/readyz with Redis down = %d %q, want 503 naming redis", code, body)
	}
	// local: this node's share, the whole limit while it knows no peer.
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if got := r.decide(t, "ip", "a").OverallCode; got != want {
			t.Fatalf("local decision %d with Redis down = %v, want %v", i, got, want)
		}
	}
	if got := r.decide(t, "closed", "x").OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("fail_closed with Redis down = %v, want OVER_LIMIT", got)
	}
	if got := r.metric(t, `redlimit_rls_decisions_by_source_total{source="store"}`); got > 0 {
		t.Fatalf("decisions from the store with Redis down = %v", got)
	}

	if err := redis.Restart(); err != nil {
		t.Fatal(err)
	}
	// The opener retries at most every few seconds: 20 s holds on a busy machine.
	deadline := time.Now().Add(20 * time.Second)
	for r.get(t, "/readyz") != 200 {
		if time.Now().After(deadline) {
			_, body := r.getBody(t, "/readyz")
			t.Fatalf("not ready 20s after Redis started: %s\nlogs:\n%s", body, r.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "a decision from the store", func() bool {
		r.decide(t, "ip", "b")
		return r.metric(t, `redlimit_rls_decisions_by_source_total{source="store"}`) > 0
	})
	keys, err := redis.Do("KEYS", "*ip*")
	if err != nil || !strings.Contains(keys, "ip") {
		t.Fatalf("Redis keys after a decision = %q, %v", keys, err)
	}
}

// Settings that cannot work stop start-up: a wrong password is one.
func TestServeStopsOnBadPassword(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, "--requirepass", "right")
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(lazyRules), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "redis://:wrong@" + redis.Addr()
	_, err := New(context.Background(), Options{ConfigPath: path, RedisURL: url, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("New with a wrong password: %v, want an error naming WRONGPASS", err)
	}
	var stderr bytes.Buffer
	code := Main([]string{"--config", path, "--redis", url, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, &bytes.Buffer{}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "cannot start") || !strings.Contains(stderr.String(), "WRONGPASS") {
		t.Fatalf("serve with a wrong password: exit %d, stderr %q; want 1, cannot start, WRONGPASS", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "wrong@") {
		t.Fatalf("stderr shows the password: %q", stderr.String())
	}
}

// Each way Open fails is classed: only a Redis not reached is retried.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, "--requirepass", "right")
	tlsRedis := redistest.StartTLS(t)
	down := redistest.Start(t)
	if err := down.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url string
		want      bool
	}{
		{"refused", "redis://" + down.Addr(), true},
		{"not a URL", "mysql://x", false},
		{"wrong password", "redis://:wrong@" + redis.Addr(), false},
		{"no password", "redis://" + redis.Addr(), false},
		{"TLS with an unknown CA", "rediss://" + tlsRedis.TLSAddr, false},
		{"CA file missing", "rediss://" + tlsRedis.TLSAddr + "?ca_file=/nonexistent.pem", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := redisstore.Open(ctx, tc.url)
			if err == nil {
				s.Close()
				t.Fatal("Open: no error")
			}
			if got := unreachable(err); got != tc.want {
				t.Fatalf("unreachable(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
