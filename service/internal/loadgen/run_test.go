package loadgen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/service/internal/loadgen"
)

// maxAllowed returns the most cost l can admit for one key over an interval
// of length d. Callers add a millisecond to the run's elapsed time for the
// store's clock, which is not the monotonic clock Run measures with.
func maxAllowed(l redlimit.Limit, d time.Duration) int64 {
	switch l.Algorithm {
	case redlimit.TokenBucket:
		// Burst at once, then one token per emission interval.
		t := time.Duration(l.EmissionInterval()) * time.Microsecond
		return l.Burst + int64(d/t) + 1
	case redlimit.SlidingLog:
		// At most Count in any interval of one period; floor(d/P)+1 of
		// them cover d.
		return l.Count * (int64(d/l.Period) + 1)
	}
	// The fixed and sliding windows admit at most Count in each
	// epoch-aligned window (the sliding window's estimate is at least the
	// current window's count), and d touches at most floor(d/P)+2 windows.
	return l.Count * (int64(d/l.Period) + 2)
}

// checkPlausible checks what holds for every result.
func checkPlausible(t *testing.T, res *loadgen.Result) {
	t.Helper()
	if res.Decisions <= 0 {
		t.Fatalf("no decisions: %+v", res)
	}
	if res.Allowed+res.Denied+res.Errors != res.Decisions {
		t.Errorf("allowed %d + denied %d + errors %d != decisions %d", res.Allowed, res.Denied, res.Errors, res.Decisions)
	}
	l := res.Latency
	if l.Count != res.Allowed+res.Denied {
		t.Errorf("latency count %d, want allowed+denied = %d", l.Count, res.Allowed+res.Denied)
	}
	if !(0 < l.Min && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Errorf("latencies out of order: min %v p50 %v p90 %v p99 %v p99.9 %v max %v", l.Min, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if l.Mean < l.Min || l.Mean > l.Max {
		t.Errorf("mean %v is outside [%v, %v]", l.Mean, l.Min, l.Max)
	}
	if res.Elapsed < res.Duration {
		t.Errorf("elapsed %v is shorter than the duration %v", res.Elapsed, res.Duration)
	}
	if want := float64(res.Decisions) / res.Elapsed.Seconds(); res.Rate != want {
		t.Errorf("rate %g, want %g", res.Rate, want)
	}
}

func newMemory(t *testing.T) *memory.Store {
	t.Helper()
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var algorithmLimits = []redlimit.Limit{
	redlimit.Per(50, 100*time.Millisecond).FixedWindow(),
	redlimit.Per(50, 100*time.Millisecond).SlidingLog(),
	redlimit.Per(50, 100*time.Millisecond).SlidingWindow(),
	redlimit.Per(50, 100*time.Millisecond).TokenBucket(10),
}

func TestRunMemory(t *testing.T) {
	t.Parallel()
	for _, limit := range algorithmLimits {
		t.Run(limit.Algorithm.String(), func(t *testing.T) {
			t.Parallel()
			const keys = 4
			target := &loadgen.LimiterTarget{Limiter: newMemory(t), Limit: limit, Name: "memory"}
			res, err := loadgen.Run(t.Context(), target, loadgen.Options{
				Concurrency: 8, Duration: 300 * time.Millisecond, Keys: keys,
			})
			if err != nil {
				t.Fatal(err)
			}
			checkPlausible(t, res)
			if res.Errors != 0 || res.FirstError != "" {
				t.Errorf("errors %d (first %q), want none", res.Errors, res.FirstError)
			}
			bound := keys * maxAllowed(limit, res.Elapsed+time.Millisecond)
			if res.Allowed > bound {
				t.Errorf("allowed %d in %v over %d keys: above the %d that %s permits", res.Allowed, res.Elapsed, keys, bound, limit)
			}
			// Enough decisions for every key to reach its limit.
			if res.Decisions >= 10_000 && (res.Allowed < keys*limit.Max() || res.Denied == 0) {
				t.Errorf("allowed %d, denied %d of %d: want at least %d allowed, and some denied", res.Allowed, res.Denied, res.Decisions, keys*limit.Max())
			}
			if res.Target != "memory" || res.Algorithm != limit.Algorithm.String() || res.Limit != limit.String() {
				t.Errorf("target %q algorithm %q limit %q, want memory, %s, %s", res.Target, res.Algorithm, res.Limit, limit.Algorithm, limit)
			}
			if res.Concurrency != 8 || res.Keys != keys || res.Cost != 1 || res.Distribution != loadgen.Uniform || res.Interrupted {
				t.Errorf("options not reported: %+v", res)
			}
			t.Logf("%s: %d decisions (%.0f/s), %d allowed (bound %d), p99 %v", limit, res.Decisions, res.Rate, res.Allowed, bound, res.Latency.P99)
		})
	}
}

// countingTarget allows everything and counts the decisions per key: keys
// are prefix "k" and an index below len(counts).
type countingTarget struct {
	counts []atomic.Int64
}

func (c *countingTarget) Decide(_ context.Context, key string, cost int64) (bool, error) {
	i, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
	if err != nil || i < 0 || i >= len(c.counts) {
		return false, fmt.Errorf("unexpected key %q", key)
	}
	c.counts[i].Add(cost)
	return true, nil
}

// hottest returns the index of the largest count, the count, and the total.
func (c *countingTarget) hottest() (int, int64, int64) {
	var hot int
	var most, total int64
	for i := range c.counts {
		n := c.counts[i].Load()
		total += n
		if n > most {
			hot, most = i, n
		}
	}
	return hot, most, total
}

func TestRunDistribution(t *testing.T) {
	t.Parallel()
	const keys = 200
	for _, tc := range []struct {
		dist loadgen.Distribution
		// The hottest key's share of the requests, in multiples of 1/keys.
		minShare, maxShare float64
	}{
		// With s = 1.1 over 200 keys, P(key 0) = 1/sum(k^-1.1, k=1..200) ≈ 0.21: 42/keys.
		{loadgen.Zipf, 20, keys},
		// With at least 50 decisions a key on average, the most any key
		// gets is within 2x of it but with a tiny chance.
		{loadgen.Uniform, 1, 2},
	} {
		t.Run(tc.dist.String(), func(t *testing.T) {
			t.Parallel()
			target := &countingTarget{counts: make([]atomic.Int64, keys)}
			res, err := loadgen.Run(t.Context(), target, loadgen.Options{
				Concurrency: 4, Duration: 300 * time.Millisecond, Keys: keys, Distribution: tc.dist,
				KeyPrefix: "k", Seed: 7,
			})
			if err != nil {
				t.Fatal(err)
			}
			checkPlausible(t, res)
			hot, most, total := target.hottest()
			if total != res.Decisions || res.Errors != 0 {
				t.Fatalf("the target counted %d decisions, the result %d, %d errors (first %s)", total, res.Decisions, res.Errors, res.FirstError)
			}
			if total < 50*keys {
				t.Fatalf("only %d decisions in %v, want at least %d to see the distribution", total, res.Elapsed, 50*keys)
			}
			share := float64(most) / float64(total) * keys
			if share < tc.minShare || share > tc.maxShare {
				t.Errorf("the hottest key k%d had %.1f/%d of the requests, want %g..%g", hot, share, keys, tc.minShare, tc.maxShare)
			}
			if tc.dist == loadgen.Zipf && hot != 0 {
				t.Errorf("the hottest key is k%d, want k0", hot)
			}
		})
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	target := &loadgen.LimiterTarget{Limiter: newMemory(t), Limit: redlimit.PerSecond(10).TokenBucket(5), Name: "memory"}
	res, err := loadgen.Run(t.Context(), target, loadgen.Options{
		Concurrency: 2, Duration: 50 * time.Millisecond, Keys: 10, Distribution: loadgen.Zipf, ZipfS: 1.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	res.FirstError = "an error"
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back loadgen.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Start.Equal(res.Start) {
		t.Errorf("start %v, back %v", res.Start, back.Start)
	}
	back.Start = res.Start
	if !reflect.DeepEqual(&back, res) {
		t.Errorf("round trip\n got %+v\nwant %+v\njson %s", back, *res, b)
	}

	// The field names are stable: docs and scripts read them.
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"target", "algorithm", "limit", "concurrency", "keys", "distribution", "zipf_s", "cost",
		"duration_us", "seed", "start", "elapsed_us", "decisions", "allowed", "denied", "errors",
		"decisions_per_second", "latency", "first_error",
	} {
		if _, ok := fields[name]; !ok {
			t.Errorf("no field %q in %s", name, b)
		}
	}
	lat, _ := fields["latency"].(map[string]any)
	for _, name := range []string{"count", "min_us", "mean_us", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us"} {
		if _, ok := lat[name]; !ok {
			t.Errorf("no field latency.%s in %s", name, b)
		}
	}
	if fields["distribution"] != "zipf" || fields["duration_us"] != 50000.0 || fields["limit"] != "10/1s token_bucket burst 5" {
		t.Errorf("distribution %v, duration_us %v, limit %v", fields["distribution"], fields["duration_us"], fields["limit"])
	}
	if want := float64(res.Latency.P99) / 1e3; lat["p99_us"] != want {
		t.Errorf("p99_us %v, want %v", lat["p99_us"], want)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	boom := errors.New("boom")
	target := loadgen.TargetFunc(func(ctx context.Context, key string, cost int64) (bool, error) {
		switch n.Add(1) % 3 {
		case 0:
			return false, fmt.Errorf("decision %s: %w", key, boom)
		case 1:
			return true, nil
		}
		return false, nil
	})
	res, err := loadgen.Run(t.Context(), target, loadgen.Options{Concurrency: 3, Duration: 100 * time.Millisecond, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkPlausible(t, res)
	if res.Errors == 0 || res.Allowed == 0 || res.Denied == 0 {
		t.Errorf("allowed %d, denied %d, errors %d: want some of each", res.Allowed, res.Denied, res.Errors)
	}
	if !strings.Contains(res.FirstError, "boom") {
		t.Errorf("first error %q, want boom", res.FirstError)
	}
	if !strings.HasPrefix(res.Target, "loadgen.TargetFunc") {
		t.Errorf("target %q, want its type", res.Target)
	}
}

func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// A target that honours ctx and interrupts the run at its 20th
	// decision: the decisions cut short by the interrupt are not counted.
	var n atomic.Int64
	target := loadgen.TargetFunc(func(ctx context.Context, key string, cost int64) (bool, error) {
		if n.Add(1) == 20 {
			cancel()
			return true, nil
		}
		select {
		case <-time.After(time.Millisecond):
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
	start := time.Now()
	res, err := loadgen.Run(ctx, target, loadgen.Options{Concurrency: 4, Duration: time.Minute, Keys: 4})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Run took %v after an interrupt", took)
	}
	if !res.Interrupted || res.Errors != 0 || res.Allowed == 0 || res.Allowed > 20 {
		t.Errorf("interrupted %v, allowed %d, errors %d: want interrupted, 1..20 allowed, no errors", res.Interrupted, res.Allowed, res.Errors)
	}
	var b bytes.Buffer
	res.WriteSummary(&b)
	if !strings.Contains(b.String(), "(interrupted)") {
		t.Errorf("the summary does not say the run was interrupted:\n%s", b.String())
	}
}

func TestRunDrain(t *testing.T) {
	t.Parallel()
	// A target that never answers until its context ends: after Duration
	// and Drain, Run cancels the calls and counts them as errors.
	target := loadgen.TargetFunc(func(ctx context.Context, key string, cost int64) (bool, error) {
		<-ctx.Done()
		return false, ctx.Err()
	})
	res, err := loadgen.Run(t.Context(), target, loadgen.Options{Concurrency: 3, Duration: 50 * time.Millisecond, Drain: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 3 || res.Decisions != 3 || res.Latency.Count != 0 {
		t.Errorf("decisions %d, errors %d, latency count %d: want the 3 calls cancelled as errors", res.Decisions, res.Errors, res.Latency.Count)
	}
	if !strings.Contains(res.FirstError, "context canceled") {
		t.Errorf("first error %q", res.FirstError)
	}
	if res.Elapsed > 2*time.Second {
		t.Errorf("elapsed %v", res.Elapsed)
	}
	var b bytes.Buffer
	res.WriteSummary(&b)
	if !strings.Contains(b.String(), "no decision answered") {
		t.Errorf("summary:\n%s", b.String())
	}
}

func TestRunInvalidOptions(t *testing.T) {
	t.Parallel()
	ok := loadgen.TargetFunc(func(context.Context, string, int64) (bool, error) { return true, nil })
	for _, tc := range []struct {
		name   string
		target loadgen.Target
		opts   loadgen.Options
	}{
		{"no target", nil, loadgen.Options{}},
		{"concurrency", ok, loadgen.Options{Concurrency: -1}},
		{"duration", ok, loadgen.Options{Duration: -time.Second}},
		{"keys", ok, loadgen.Options{Keys: loadgen.MaxKeys + 1}},
		{"distribution", ok, loadgen.Options{Distribution: 9}},
		{"zipf", ok, loadgen.Options{Distribution: loadgen.Zipf, ZipfS: 1}},
		{"cost", ok, loadgen.Options{Cost: -1}},
		{"cost max", ok, loadgen.Options{Cost: redlimit.MaxCost + 1}},
		{"drain", ok, loadgen.Options{Drain: -1}},
	} {
		_, err := loadgen.Run(t.Context(), tc.target, tc.opts)
		if !errors.Is(err, loadgen.ErrInvalidOptions) {
			t.Errorf("%s: error %v, want ErrInvalidOptions", tc.name, err)
		}
	}
}

func TestRunProgress(t *testing.T) {
	t.Parallel()
	target := &loadgen.LimiterTarget{Limiter: newMemory(t), Limit: redlimit.PerSecond(1000)}
	var out bytes.Buffer
	res, err := loadgen.Run(t.Context(), target, loadgen.Options{
		Concurrency: 2, Duration: 330 * time.Millisecond, Progress: &out, ProgressInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^ +\d+\.\ds +\d+ decisions/s  allowed (\d+)  denied (\d+)  errors 0$`)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) < 2 || len(lines) > 4 {
		t.Fatalf("%d progress lines in 330ms at 100ms, want about 3:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("progress line %q does not match %s", l, line)
		}
	}
	if res.Target != "limiter" {
		t.Errorf("target %q, want limiter", res.Target)
	}
}

func TestWriteSummary(t *testing.T) {
	t.Parallel()
	res := &loadgen.Result{
		Target: "memory", Limit: "100/1s sliding_window", Concurrency: 64, Keys: 10000,
		Distribution: loadgen.Zipf, ZipfS: 1.1, Cost: 1, Duration: 10 * time.Second, Elapsed: 10*time.Second + 2*time.Millisecond,
		Decisions: 1000, Allowed: 900, Denied: 90, Errors: 10, Rate: 99.98, FirstError: "boom",
		Latency: loadgen.Latency{Count: 990, Min: 800, Mean: 41_234, P50: 40_100, P90: 80_150, P99: 150_000, P999: 2_500_000, Max: 12 * time.Second},
	}
	var b bytes.Buffer
	if err := res.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := `target       memory
limit        100/1s sliding_window
load         64 workers, 10000 keys (zipf, s=1.1), cost 1, for 10s
elapsed      10.002s
decisions    1000  (100/s)
allowed      900  (90.0%)
denied       90  (9.0%)
errors       10  (first: boom)
latency      p50 40.1µs  p90 80.2µs  p99 150µs  p99.9 2.50ms  max 12.0s  (mean 41.2µs)
`
	if b.String() != want {
		t.Errorf("summary\n%s\nwant\n%s", b.String(), want)
	}
}

// perWorker is a WorkerTarget that counts the calls each worker's target
// gets.
type perWorker struct {
	calls []atomic.Int64
	asked atomic.Int64 // ForWorker calls
}

func (p *perWorker) Decide(context.Context, string, int64) (bool, error) {
	return false, errors.New("Decide of the WorkerTarget itself, not of a worker's")
}

func (p *perWorker) ForWorker(i int) loadgen.Target {
	p.asked.Add(1)
	return loadgen.TargetFunc(func(context.Context, string, int64) (bool, error) {
		p.calls[i].Add(1)
		return true, nil
	})
}

// TestRunDecisions checks that Options.Decisions sizes the run: exactly
// that many decisions, however short Duration is, each worker asking its
// own Target of a WorkerTarget.
func TestRunDecisions(t *testing.T) {
	const workers, n = 8, 5000
	p := &perWorker{calls: make([]atomic.Int64, workers)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := loadgen.Run(ctx, p, loadgen.Options{Concurrency: workers, Duration: time.Nanosecond, Decisions: n, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted {
		t.Fatalf("interrupted: %+v", res)
	}
	checkPlausible(t, res)
	if res.Decisions != n || res.Allowed != n || res.Errors != 0 {
		t.Errorf("decisions %d, allowed %d, errors %d (%q); want %d allowed", res.Decisions, res.Allowed, res.Errors, res.FirstError, n)
	}
	if got := p.asked.Load(); got != workers {
		t.Errorf("ForWorker called %d times, want %d", got, workers)
	}
	var sum int64
	for i := range p.calls {
		sum += p.calls[i].Load()
	}
	if sum != n {
		t.Errorf("the workers' targets got %d calls, want %d", sum, n)
	}
	if res.Duration != 0 {
		t.Errorf("Duration %v, want 0 for a run sized by decisions", res.Duration)
	}
}

func TestRunNegativeDecisions(t *testing.T) {
	_, err := loadgen.Run(context.Background(), loadgen.TargetFunc(func(context.Context, string, int64) (bool, error) { return true, nil }), loadgen.Options{Decisions: -1})
	if !errors.Is(err, loadgen.ErrInvalidOptions) {
		t.Fatalf("err = %v, want ErrInvalidOptions", err)
	}
}
