package loadgen_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/service/internal/loadgen"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// uniquePrefix returns a key prefix no other test uses, so tests share the
// Redis server without flushing it.
func uniquePrefix() string { return fmt.Sprintf("t%x:", rand.Uint64()) }

func TestRunRedis(t *testing.T) {
	t.Parallel()
	url := "redis://" + redistest.Shared(t).Addr()
	store, err := redisstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, limit := range []redlimit.Limit{
		redlimit.Per(20, 100*time.Millisecond).SlidingLog(),
		redlimit.Per(20, 100*time.Millisecond).TokenBucket(5),
	} {
		t.Run(limit.Algorithm.String(), func(t *testing.T) {
			const keys = 4
			target := &loadgen.LimiterTarget{Limiter: store, Limit: limit, Name: "redis"}
			res, err := loadgen.Run(t.Context(), target, loadgen.Options{
				Concurrency: 8, Duration: 300 * time.Millisecond, Keys: keys, KeyPrefix: uniquePrefix(),
			})
			if err != nil {
				t.Fatal(err)
			}
			checkPlausible(t, res)
			if res.Errors != 0 {
				t.Errorf("%d errors, first %s", res.Errors, res.FirstError)
			}
			// Redis decides on its own clock, which runs with ours: the
			// decisions happened within Elapsed.
			if bound := keys * maxAllowed(limit, res.Elapsed+time.Millisecond); res.Allowed > bound {
				t.Errorf("allowed %d in %v: above the %d %s permits", res.Allowed, res.Elapsed, bound, limit)
			}
			// Enough decisions for every key to reach its limit.
			if res.Decisions >= 1000 && (res.Allowed < keys*limit.Max() || res.Denied == 0) {
				t.Errorf("allowed %d, denied %d of %d: want at least %d allowed, and some denied", res.Allowed, res.Denied, res.Decisions, keys*limit.Max())
			}
			t.Logf("%s on Redis: %d decisions (%.0f/s), p50 %v, p99 %v", limit, res.Decisions, res.Rate, res.Latency.P50, res.Latency.P99)
		})
	}
}

func TestMainRedis(t *testing.T) {
	t.Parallel()
	url := "redis://" + redistest.Shared(t).Addr()
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr strings.Builder
	code := loadgen.Main([]string{
		"--target", "redis", "--redis", url, "--algorithm", "fixed_window", "--limit", "10", "--period", "1s",
		"--concurrency", "4", "--duration", "200ms", "--keys", "3", "--key-prefix", uniquePrefix(), "--json", out,
	}, &stdout, &stderr)
	if code != loadgen.ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	checkPlausible(t, &res)
	if res.Target != "redis "+url || res.Limit != "10/1s fixed_window" || res.Errors != 0 {
		t.Errorf("target %q, limit %q, errors %d (%s)", res.Target, res.Limit, res.Errors, res.FirstError)
	}
	// Three keys (the preflight had a key of its own), in the windows the
	// run touched: two in 200ms, more if a busy machine stretched it.
	if bound := 3 * maxAllowed(redlimit.Per(10, time.Second).FixedWindow(), res.Elapsed+time.Millisecond); res.Allowed > bound || res.Allowed == 0 {
		t.Errorf("allowed %d in %v, want 1..%d", res.Allowed, res.Elapsed, bound)
	}
	if !strings.Contains(stdout.String(), "10/1s fixed_window") {
		t.Errorf("summary:\n%s", stdout.String())
	}
}
