package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit/internal/redistest"
)

// budgetRules are token budgets of 5,000 an hour (a day for the fixed
// window, whose window aligns to the epoch), one per algorithm, and a fast
// token bucket whose debt drains within seconds. The counting is the
// default, auto: a descriptor's own hits_addend is a debit.
const budgetRules = `domain: llm
descriptors:
  - key: budget
    value: sliding_log
    rate_limit: {unit: hour, requests_per_unit: 5000, algorithm: sliding_log}
  - key: budget
    value: fixed_window
    rate_limit: {unit: day, requests_per_unit: 5000, algorithm: fixed_window}
  - key: budget
    value: sliding_window
    rate_limit: {unit: hour, requests_per_unit: 5000, algorithm: sliding_window}
  - key: budget
    value: token_bucket
    rate_limit: {unit: hour, requests_per_unit: 5000, algorithm: token_bucket}
  - key: budget
    value: fast
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
`

// budgetCall sends the check (hits 0) or the debit (hits > 0) of budget alg
// to p, over gRPC or /json, and returns the descriptor's answer.
func budgetCall(p *proc, alg string, hits uint64, overJSON bool) (pb.RateLimitResponse_Code, error) {
	d := desc("budget", alg)
	d.HitsAddend = wrapperspb.UInt64(hits)
	req := &pb.RateLimitRequest{Domain: "llm", Descriptors: []*rlpb.RateLimitDescriptor{d}}
	if !overJSON {
		resp, err := p.client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			return 0, err
		}
		return resp.OverallCode, nil
	}
	body, err := protojson.Marshal(req)
	if err != nil {
		return 0, err
	}
	code, _, out := p.post(body)
	var resp struct {
		OverallCode string `json:"overallCode"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || (code != 200 && code != 429) {
		return 0, fmt.Errorf("/json: %d %s", code, out)
	}
	return pb.RateLimitResponse_Code(pb.RateLimitResponse_Code_value[resp.OverallCode]), nil
}

// TestTokenBudgetE2E runs Envoy's check-then-debit flow for token budgets
// against three instances on one Redis, over gRPC and /json alike: each
// caller checks (hits_addend 0) and, when the check passes, does its "work"
// and debits what it cost (its own hits_addend). Checks pass concurrently
// while the budget lasts, so the debits overshoot it: every debit must be
// counted all the same, exactly, and the checks after it denied until the
// debt drains. Redis's own state is read to see the exact total.
func TestTokenBudgetE2E(t *testing.T) {
	t.Parallel()
	// Keep clear of the hour's and day's boundaries (windows align to the epoch).
	if s := time.Now().Unix() % 3600; s < 10 || s > 3540 {
		time.Sleep(time.Duration(3600-s+10) % 3600 * time.Second)
	}
	redis := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "budget.yaml")
	writeFile(t, cfg, budgetRules)
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, "--config="+cfg, "--redis=redis://"+redis.Addr(), "--timeout=10s"))
	}
	start := redisTime(t, redis)

	algs := []string{"sliding_log", "fixed_window", "sliding_window", "token_bucket"}
	var mu sync.Mutex
	debited := map[string]int64{}
	var wg sync.WaitGroup
	for pi, p := range procs {
		for w := range 4 {
			for _, alg := range algs {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(pi), uint64(w)))
					for i := range 60 {
						code, err := budgetCall(p, alg, 0, (i+w)%2 == 0)
						if err != nil {
							t.Errorf("%s: check: %v", alg, err)
							return
						}
						if code != pb.RateLimitResponse_OK {
							return // the budget is spent
						}
						cost := uint64(50 + rng.IntN(450))
						code, err = budgetCall(p, alg, cost, (i+w)%2 == 1)
						if err != nil {
							t.Errorf("%s: debit: %v", alg, err)
							return
						}
						mu.Lock()
						debited[alg] += int64(cost)
						mu.Unlock()
					}
					t.Errorf("%s: the checks still pass after 60 debits", alg)
				})
			}
		}
	}
	wg.Wait()
	end := redisTime(t, redis)

	for _, alg := range algs {
		total := debited[alg]
		t.Logf("%s: %d debited against a budget of 5,000", alg, total)
		if total <= 5000 {
			t.Errorf("%s: %d debited, not over the budget: the test did not overshoot", alg, total)
		}
		for pi, p := range procs {
			for _, overJSON := range []bool{false, true} {
				if code, err := budgetCall(p, alg, 0, overJSON); err != nil || code != pb.RateLimitResponse_OVER_LIMIT {
					t.Errorf("%s: a check on instance %d (json %v) after the debt: %v %v, want OVER_LIMIT", alg, pi, overJSON, code, err)
				}
			}
		}
		key := budgetKey(t, redis, alg)
		switch alg {
		case "fixed_window", "sliding_window":
			// One window holds every debit: its count is their sum.
			fields := redisLines(t, redis, "HGETALL", key)
			var count int64
			for i := 0; i+1 < len(fields); i += 2 {
				if !strings.HasPrefix(fields[i], "p") {
					count += atoi(t, fields[i+1])
				}
			}
			if count != total {
				t.Errorf("%s: Redis counted %d, want the %d debited", alg, count, total)
			}
		case "sliding_log":
			// The newest entry's member is the units counted through it.
			top := redisLines(t, redis, "ZRANGE", key, "-1", "-1")
			if len(top) != 1 || atoi(t, top[0]) != total {
				t.Errorf("sliding_log: Redis counted %v, want the %d debited", top, total)
			}
		case "token_bucket":
			// The bucket never refilled during the test: its theoretical
			// arrival time is the first debit's time plus every token's
			// emission interval (720 ms).
			tat := atoi(t, redisLines(t, redis, "GET", key)[0])
			ei := int64(720_000)
			if tat < start+total*ei || tat > end+total*ei {
				t.Errorf("token_bucket: TAT %d µs, want between %d and %d: %d tokens at 720 ms", tat, start+total*ei, end+total*ei, total)
			}
		}
	}

	// A debt drains: 300 tokens debited on a bucket of 100 a second is
	// two seconds of debt past the burst.
	p := procs[0]
	if code, err := budgetCall(p, "fast", 0, false); err != nil || code != pb.RateLimitResponse_OK {
		t.Fatalf("fast: first check: %v %v", code, err)
	}
	if code, err := budgetCall(p, "fast", 300, true); err != nil || code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("fast: a debit of 300 on a burst of 100: %v %v, want OVER_LIMIT (counted all the same)", code, err)
	}
	debitAt := time.Now()
	if code, err := procs[1].client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "llm", Descriptors: []*rlpb.RateLimitDescriptor{desc("budget", "fast")}}); err != nil || code.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("fast: a request on another instance right after the debt: %v %v, want OVER_LIMIT", code, err)
	}
	for {
		code, err := budgetCall(procs[2], "fast", 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if code == pb.RateLimitResponse_OK {
			break
		}
		if time.Since(debitAt) > 15*time.Second {
			t.Fatal("fast: the debt of 2 s has not drained in 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(debitAt); d < 1800*time.Millisecond {
		t.Errorf("fast: the debt drained in %v, want about 2 s", d)
	}
}

// redisTime returns the Redis server's time in µs.
func redisTime(t *testing.T, r *redistest.Server) int64 {
	t.Helper()
	lines := redisLines(t, r, "TIME")
	if len(lines) != 2 {
		t.Fatalf("TIME: %v", lines)
	}
	return atoi(t, lines[0])*1_000_000 + atoi(t, lines[1])
}

// budgetKey returns the Redis key of budget alg: the one key whose hash tag
// ends with its descriptor's value (internal/rls's descriptorKey).
func budgetKey(t *testing.T, r *redistest.Server, alg string) string {
	t.Helper()
	var found []string
	for _, k := range redisLines(t, r, "KEYS", "*") {
		if strings.Contains(k, fmt.Sprintf("=%d:%s}", len(alg), alg)) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("keys of %s: %q", alg, found)
	}
	return found[0]
}

func redisLines(t *testing.T, r *redistest.Server, args ...string) []string {
	t.Helper()
	out, err := r.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
