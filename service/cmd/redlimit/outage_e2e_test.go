package main

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
)

// Issue 14, failure path 1, through the built binary as Envoy calls it: a
// frozen Redis (SIGSTOP) and callers whose deadline comes before the
// service's Redis timeout. Before, every request ended in DeadlineExceeded
// at the caller's deadline (Envoy then fails open, whatever the rule's
// policy) and the breaker never opened. Now the policy answers within the
// caller's deadline (a fail_closed rule: OVER_LIMIT; a local one: its
// share), the breaker opens, and once Redis runs again the service is back
// on it. Envoy's 20 ms against 50 ms is resilient's unit tests' case: a
// busy host starves a process that long, so here both are scaled up.
func TestServeFrozenRedisShortDeadlines(t *testing.T) {
	t.Parallel()
	const (
		deadline     = time.Second      // the callers'
		redisTimeout = 10 * time.Second // the service's, far longer
	)
	const rules = `domain: outage
descriptors:
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 1000000, failure_policy: fail_closed}
  - key: local
    rate_limit: {unit: hour, requests_per_unit: 1000000, failure_policy: local}
`
	cfg := filepath.Join(t.TempDir(), "outage.yaml")
	writeFile(t, cfg, rules)
	redis := redistest.Start(t)
	p := startProc(t, nil, "--config="+cfg, "--redis=redis://"+redis.Addr(), "--timeout="+redisTimeout.String())
	ask := func(key string) (pb.RateLimitResponse_Code, error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		resp, err := p.ask(ctx, "outage", desc(key, "v"))
		if err != nil {
			return 0, err
		}
		return resp.OverallCode, nil
	}
	for _, key := range []string{"closed", "local"} {
		waitFor(t, key+" answered OK by Redis", func() bool { c, err := ask(key); return err == nil && c == pb.RateLimitResponse_OK })
	}

	if err := redis.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			redis.Resume()
		}
	}()
	type tally struct{ ok, over, errs atomic.Int64 }
	var closed, local tally
	var wg sync.WaitGroup
	// Each caller's first call waits for its deadline, before the breaker
	// opens; a starved host may answer it just past. The calls after
	// the breaker opens must outnumber those, hence 4 s of them.
	const frozen = 4 * time.Second
	stop := time.Now().Add(frozen)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, tl := "closed", &closed
			if g%2 == 1 {
				key, tl = "local", &local
			}
			for time.Now().Before(stop) {
				code, err := ask(key)
				switch {
				case err != nil:
					tl.errs.Add(1)
				case code == pb.RateLimitResponse_OK:
					tl.ok.Add(1)
				default:
					tl.over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// One scrape for both states: two could see the breaker on either side
	// of a transition from open to half-open, and count it twice.
	_, page := p.get("/metrics")
	opened := seriesValue(page, `redlimit_breaker_state{state="open"}`) + seriesValue(page, `redlimit_breaker_state{state="half-open"}`)
	if err := redis.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	t.Logf("Redis frozen %s, 16 callers of %s: fail_closed %d over / %d OK / %d errors; local %d OK / %d over / %d errors; breaker not closed: %v",
		frozen, deadline, closed.over.Load(), closed.ok.Load(), closed.errs.Load(), local.ok.Load(), local.over.Load(), local.errs.Load(), opened)

	// The margin holds on a busy 2-core machine with the race detector:
	// before, every request was an error.
	for _, c := range []struct {
		name string
		tl   *tally
	}{{"fail_closed", &closed}, {"local", &local}} {
		answered := c.tl.ok.Load() + c.tl.over.Load()
		if answered == 0 || c.tl.errs.Load() > answered {
			t.Errorf("%s: %d answered, %d errors: the policy must answer within the caller's deadline", c.name, answered, c.tl.errs.Load())
		}
	}
	if closed.ok.Load() != 0 {
		t.Errorf("fail_closed: %d requests allowed while Redis was frozen", closed.ok.Load())
	}
	if local.ok.Load() == 0 {
		t.Error("local: nothing allowed while Redis was frozen, want this node's share")
	}
	if opened != 1 {
		t.Error("the breaker stayed closed while every Redis call timed out")
	}
	waitFor(t, "fail_closed answered OK by Redis again", func() bool { c, err := ask("closed"); return err == nil && c == pb.RateLimitResponse_OK })
}
