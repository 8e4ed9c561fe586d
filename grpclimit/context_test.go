package grpclimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestHungRedisWithinTheCallersDeadline: with Redis hung (SIGSTOP), a call
// whose deadline passes while the limiter waits is not served unlimited;
// behind a resilient limiter it is decided by the failure policy before its
// deadline.
func TestHungRedisWithinTheCallersDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	store, err := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("g%x:", rand.Uint64())))
	if err != nil {
		t.Fatal(err)
	}
	// A store timeout longer than the callers' deadlines: theirs decide.
	// A margin for a busy machine under -race: the policy's answer and the
	// way back get a fifth of the caller's 2 s (400 ms; with 100 ms of
	// 300, a run at load average 15 missed the deadline).
	res, err := resilient.New(store, resilient.Options{Timeout: time.Minute, CallerMargin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	rule := grpclimit.Rule{Name: "ip", Limit: redlimit.PerMinute(100), Key: grpclimit.RemoteIP}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()

	t.Run("store", func(t *testing.T) {
		log, buf := newLogger()
		client, h := serve(t, mustNew(t, store, grpclimit.Options{Logger: log}, rule))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("%v, want DeadlineExceeded", err)
		}
		time.Sleep(300 * time.Millisecond) // for the server's side of the call to end
		if checks, _ := h.counts(); checks != 0 {
			t.Errorf("the handler ran %d times after the limiter gave up on the caller's deadline", checks)
		}
		if strings.Contains(buf.String(), "unlimited") {
			t.Errorf("logged:\n%s", buf)
		}
	})
	t.Run("resilient", func(t *testing.T) {
		log, buf := newLogger()
		client, h := serve(t, mustNew(t, res, grpclimit.Options{Logger: log}, rule))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("%v, want the local fallback to allow before the deadline", err)
		}
		deadline := time.Now().Add(time.Second)
		for checks, _ := h.counts(); checks != 1; checks, _ = h.counts() {
			if time.Now().After(deadline) {
				t.Fatalf("the handler ran %d times", checks)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if strings.Contains(buf.String(), "limiter failed") {
			t.Errorf("logged:\n%s", buf)
		}
	})
}
