package sim

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// run runs p under limit with all four algorithms and returns the report
// and its entries by algorithm.
func run(t *testing.T, limit redlimit.Limit, p Pattern) (*Report, map[redlimit.Algorithm]AlgorithmReport) {
	t.Helper()
	r, err := Run(context.Background(), limit, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := make(map[redlimit.Algorithm]AlgorithmReport)
	for _, a := range r.Algorithms {
		by[a.Algorithm] = a
	}
	return r, by
}

type want struct {
	admitted, maxInWindow int
	over                  int64
	overPercent           float64
}

func check(t *testing.T, by map[redlimit.Algorithm]AlgorithmReport, wants map[redlimit.Algorithm]want) {
	t.Helper()
	for alg, w := range wants {
		a := by[alg]
		got := want{a.Admitted, a.MaxInWindow, a.OverLimit, a.OverLimitPercent}
		if got != w {
			t.Errorf("%s: admitted, max in window, over, over %% = %v, want %v", alg, got, w)
		}
		if a.Admitted+a.Denied != len(a.allowed) {
			t.Errorf("%s: admitted %d + denied %d != %d requests", alg, a.Admitted, a.Denied, len(a.allowed))
		}
	}
}

// The fixed window admits exactly twice the limit across a boundary.
//
// Straddle(100, 1m): requests at 54s + k·60ms and 60s + k·60ms, k = 0..99.
//   - fixed_window: 100 in window [0, 1m), 100 in [1m, 2m): all 200, and all
//     within [54s, 66s).
//   - sliding_log: the first 100 stay in the log until 114s..120s, so every
//     request of the second half is denied.
//   - sliding_window: at 60s + e, the estimate is 100·(60s−e)/60s + cur, so a
//     request passes when cur+1 ≤ e/0.6s = k/10: at k = 10, 20, …, 90. 9 more.
//   - token_bucket (burst 100, a token per 600ms): the first half spends 100
//     tokens while 9 come back (TAT 114s at 60s); then a request at
//     60s + k·60ms after m admissions passes when 0.6·(m+1) ≤ 6 + 0.06·k:
//     k = 0..10 (11), then k = 20, 30, …, 90 (8). 19 more.
func TestStraddleFixedWindowAdmitsTwice(t *testing.T) {
	t.Parallel()
	p, err := Straddle(100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, by := run(t, redlimit.PerMinute(100), p)
	check(t, by, map[redlimit.Algorithm]want{
		redlimit.FixedWindow:   {200, 200, 100, 100},
		redlimit.SlidingLog:    {100, 100, 0, 0},
		redlimit.SlidingWindow: {109, 109, 9, 9},
		redlimit.TokenBucket:   {119, 119, 19, 19},
	})
	if got := by[redlimit.FixedWindow].MaxWindowStart; got != 54*time.Second {
		t.Errorf("fixed_window's busiest minute starts at %s, want 54s", got)
	}
	if c := by[redlimit.SlidingWindow].VsSlidingLog; c == nil || *c != (Comparison{Admitted: 9, MaxInWindow: 9, Differing: 9}) {
		t.Errorf("sliding_window vs log = %+v, want +9, +9, 9", c)
	}
	for _, a := range []redlimit.Algorithm{redlimit.FixedWindow, redlimit.SlidingLog, redlimit.TokenBucket} {
		if by[a].VsSlidingLog != nil {
			t.Errorf("%s has a comparison with the log", a)
		}
	}
	if r.Requests != 200 || r.Duration != 3*time.Minute || r.Burst != 100 {
		t.Errorf("report: %d requests over %s, burst %d", r.Requests, r.Duration, r.Burst)
	}
	if want := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC); !r.Start.Equal(want) {
		t.Errorf("Start %s, want %s", r.Start, want)
	}
}

// The sliding log never admits more than its count in any interval of one
// period, whatever the traffic; maxInWindow is checked against brute force.
func TestSlidingLogNeverExceeds(t *testing.T) {
	t.Parallel()
	mk := func(p Pattern, err error) Pattern {
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	patterns := []Pattern{
		mk(Steady(7, 10*time.Minute)),
		mk(Bursts(37, 13*time.Second, 10*time.Minute)),
		mk(Bursts(250, time.Minute, 10*time.Minute)),
		mk(Straddle(100, time.Minute)),
		mk(Poisson(3, 30*time.Minute, 1)),
		mk(Poisson(30, 5*time.Minute, 2)),
	}
	for _, p := range patterns {
		for _, limit := range []redlimit.Limit{redlimit.PerMinute(100), redlimit.PerSecond(5), redlimit.Per(17, 7*time.Second)} {
			_, by := run(t, limit, p)
			log := by[redlimit.SlidingLog]
			if log.MaxInWindow > int(limit.Count) || log.OverLimit != 0 {
				t.Errorf("%s, %s: sliding_log admitted %d in one period", p.Name, limit, log.MaxInWindow)
			}
			if log.Admitted == 0 {
				t.Errorf("%s, %s: sliding_log admitted nothing", p.Name, limit)
			}
			var times []int64
			for i, ok := range log.allowed {
				if ok {
					times = append(times, p.Offsets[i].Microseconds())
				}
			}
			if got, want := log.MaxInWindow, bruteMax(times, limit.Period.Microseconds()); got != want {
				t.Errorf("%s, %s: MaxInWindow %d, brute force %d", p.Name, limit, got, want)
			}
		}
	}
}

// bruteMax counts the times in [t, t+w) for every t that is one of times.
func bruteMax(times []int64, w int64) int {
	most := 0
	for _, s := range times {
		n := 0
		for _, t := range times {
			if t >= s && t < s+w {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func TestMaxInWindow(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		times := make([]int64, rng.IntN(60))
		for i := range times {
			times[i] = rng.Int64N(1000)
		}
		slices.Sort(times)
		w := 1 + rng.Int64N(200)
		most, from := maxInWindow(times, w)
		if want := bruteMax(times, w); most != want {
			t.Fatalf("maxInWindow(%v, %d) = %d, want %d", times, w, most, want)
		}
		if most > 0 {
			n := upper(times, from+w-1) - lower(times, from)
			if n != most {
				t.Fatalf("maxInWindow(%v, %d): [%d, %d) holds %d, not %d", times, w, from, from+w, n, most)
			}
		}
	}
}

// The sliding window counter's error against the exact log, worked out by
// hand. Limit 10 per second; windows start at whole seconds.
//
// Bunched: 10 requests at 0.9s, then 10 at 1.5s.
//   - At 0.9s every algorithm admits all 10 (the counter's previous window
//     is empty, so it is exact; the bucket is full).
//   - At 1.5s the counter is in window 1 with prev = 10, elapsed = 0.5s:
//     estimate = 10 · (1s − 0.5s)/1s + cur = 5 + cur, and a request passes
//     while 5 + cur + 1 ≤ 10, so cur = 0..4: 5 admitted, 15 in all.
//   - The log still holds the 10 from 0.9s (they leave at 1.9s): 0 admitted.
//   - So the counter is off by +5 admitted and +5 in the busiest second
//     ([0.9s, 1.9s) holds 15), and 5 decisions differ.
//   - The fixed window admits all 20; the token bucket (burst 10, a token
//     per 100ms) has TAT 1.9s after 0.9s, and at 1.5s admits while
//     TAT + 0.1s − 1.5s ≤ 1s: TAT 2.0 … 2.5, 6 admitted, 16 in all.
//
// Spread: 10 requests at 0.05s, 0.15s, …, 0.95s, then 10 at 1.5s. The
// counter still admits 5 at 1.5s; the log holds the 5 after 0.5s and also
// admits 5: here the even-spread assumption is true and the counter exact.
func TestSlidingWindowErrorByHand(t *testing.T) {
	t.Parallel()
	tens := func(at ...int) []time.Duration {
		var out []time.Duration
		for _, a := range at {
			out = append(out, time.Duration(a)*time.Millisecond)
		}
		return out
	}
	repeat := func(d time.Duration, n int) []time.Duration {
		return slices.Repeat([]time.Duration{d}, n)
	}
	limit := redlimit.PerSecond(10)

	bunched := Pattern{Name: "bunched", Offsets: append(repeat(900*time.Millisecond, 10), repeat(1500*time.Millisecond, 10)...)}
	_, by := run(t, limit, bunched)
	check(t, by, map[redlimit.Algorithm]want{
		redlimit.FixedWindow:   {20, 20, 10, 100},
		redlimit.SlidingLog:    {10, 10, 0, 0},
		redlimit.SlidingWindow: {15, 15, 5, 50},
		redlimit.TokenBucket:   {16, 16, 6, 60},
	})
	if c := by[redlimit.SlidingWindow].VsSlidingLog; *c != (Comparison{Admitted: 5, MaxInWindow: 5, Differing: 5}) {
		t.Errorf("bunched: sliding_window vs log = %+v, want +5, +5, 5", *c)
	}

	spread := Pattern{Name: "spread", Offsets: append(tens(50, 150, 250, 350, 450, 550, 650, 750, 850, 950), repeat(1500*time.Millisecond, 10)...)}
	_, by = run(t, limit, spread)
	check(t, by, map[redlimit.Algorithm]want{
		redlimit.SlidingLog:    {15, 10, 0, 0},
		redlimit.SlidingWindow: {15, 10, 0, 0},
	})
	if c := by[redlimit.SlidingWindow].VsSlidingLog; *c != (Comparison{}) {
		t.Errorf("spread: sliding_window vs log = %+v, want all zero", *c)
	}
}

// A token bucket admits its burst at once, then one request per Period/Count.
func TestTokenBucketBurstThenRate(t *testing.T) {
	t.Parallel()
	// 20 requests at 0, then one every 10ms up to 1s. Limit 10/s, burst 5:
	// 5 pass at 0 (TAT 500ms); a request at t passes when TAT + 100ms − t ≤
	// 500ms, so at 100ms, 200ms, …, 1s: 10 more.
	offs := slices.Repeat([]time.Duration{0}, 20)
	for t := 10; t <= 1000; t += 10 {
		offs = append(offs, time.Duration(t)*time.Millisecond)
	}
	limit := redlimit.PerSecond(10)
	limit.Burst = 5
	r, err := Run(context.Background(), limit, Pattern{Offsets: offs}, &Options{Algorithms: []redlimit.Algorithm{redlimit.TokenBucket}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Algorithms) != 1 || r.Burst != 5 {
		t.Fatalf("report has %d algorithms, burst %d", len(r.Algorithms), r.Burst)
	}
	tb := r.Algorithms[0]
	var got []time.Duration
	for i, ok := range tb.allowed {
		if ok {
			got = append(got, offs[i])
		}
	}
	want := append(ms(0, 0, 0, 0, 0), ms(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)...)
	if !slices.Equal(got, want) {
		t.Errorf("admitted at %v, want %v", got, want)
	}
	// [0, 1s) holds the burst and 9 refills: 14, 4 over the count of 10.
	if tb.Admitted != 15 || tb.MaxInWindow != 14 || tb.OverLimit != 4 {
		t.Errorf("admitted %d, max %d, over %d; want 15, 14, 4", tb.Admitted, tb.MaxInWindow, tb.OverLimit)
	}
}

func TestRunAlgorithms(t *testing.T) {
	t.Parallel()
	p, _ := Straddle(10, time.Second)
	ctx := context.Background()
	limit := redlimit.PerSecond(10)

	// The sliding window alone is still compared with the log, which is
	// run but not reported.
	r, err := Run(ctx, limit, p, &Options{Algorithms: []redlimit.Algorithm{redlimit.SlidingWindow}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Algorithms) != 1 || r.Algorithms[0].VsSlidingLog == nil {
		t.Errorf("sliding_window alone: %+v", r.Algorithms)
	}

	// Order follows the options.
	r, err = Run(ctx, limit, p, &Options{Algorithms: []redlimit.Algorithm{redlimit.TokenBucket, redlimit.FixedWindow}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Algorithms) != 2 || r.Algorithms[0].Algorithm != redlimit.TokenBucket || r.Algorithms[1].Algorithm != redlimit.FixedWindow {
		t.Errorf("algorithms %v, %v", r.Algorithms[0].Algorithm, r.Algorithms[1].Algorithm)
	}

	for name, algs := range map[string][]redlimit.Algorithm{
		"unknown": {redlimit.Algorithm(9)},
		"twice":   {redlimit.FixedWindow, redlimit.FixedWindow},
	} {
		if _, err := Run(ctx, limit, p, &Options{Algorithms: algs}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := Steady(1, time.Minute)
	if _, err := Run(ctx, redlimit.Limit{Count: 0, Period: time.Second}, p, nil); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("count 0: %v, want ErrInvalidLimit", err)
	}
	big := redlimit.PerSecond(redlimit.MaxLogCount + 1)
	if _, err := Run(ctx, big, p, nil); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("sliding log above MaxLogCount: %v, want ErrInvalidLimit", err)
	}
	if _, err := Run(ctx, big, p, &Options{Algorithms: []redlimit.Algorithm{redlimit.SlidingWindow}}); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("sliding window compared with a log above MaxLogCount: %v, want ErrInvalidLimit", err)
	}
	if _, err := Run(ctx, big, p, &Options{Algorithms: []redlimit.Algorithm{redlimit.FixedWindow, redlimit.TokenBucket}}); err != nil {
		t.Errorf("no log needed: %v", err)
	}
	if _, err := Run(ctx, redlimit.PerSecond(1), Pattern{Offsets: ms(3, 2)}, nil); !errors.Is(err, ErrInvalidPattern) {
		t.Errorf("decreasing offsets: %v, want ErrInvalidPattern", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Run(done, redlimit.PerSecond(1), p, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

// A pattern with its own Start keeps its instants: a straddle shifted by
// half a window no longer straddles a fixed window's boundary.
func TestRunStart(t *testing.T) {
	t.Parallel()
	p, _ := Straddle(100, time.Minute)
	p.Start = time.Date(2024, 1, 1, 0, 0, 30, 0, time.UTC)
	_, by := run(t, redlimit.PerMinute(100), p)
	if a := by[redlimit.FixedWindow]; a.Admitted != 100 || a.MaxInWindow != 100 {
		t.Errorf("fixed_window off the boundary: admitted %d, max %d; want 100, 100", a.Admitted, a.MaxInWindow)
	}
}

// A day of Poisson traffic through the four algorithms runs quickly.
func TestRunDay(t *testing.T) {
	t.Parallel()
	p, err := Poisson(2, 24*time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	r, by := run(t, redlimit.PerMinute(100), p)
	t.Logf("a day of Poisson traffic (%d requests) through %d algorithms in %s", r.Requests, len(r.Algorithms), time.Since(begin))
	if by[redlimit.SlidingLog].MaxInWindow > 100 {
		t.Errorf("sliding_log admitted %d in a minute", by[redlimit.SlidingLog].MaxInWindow)
	}
	if by[redlimit.FixedWindow].MaxInWindow <= 100 {
		t.Errorf("fixed_window never exceeded the limit over a day at twice the rate")
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	p, _ := Straddle(100, time.Minute)
	r, _ := run(t, redlimit.PerMinute(100), p)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pattern         string  `json:"pattern"`
		DurationSeconds float64 `json:"duration_seconds"`
		Limit           struct {
			Count         int64   `json:"count"`
			PeriodSeconds float64 `json:"period_seconds"`
			Burst         int64   `json:"burst"`
		} `json:"limit"`
		Requests   int `json:"requests"`
		Algorithms []struct {
			Algorithm        string  `json:"algorithm"`
			Admitted         int     `json:"admitted"`
			Denied           int     `json:"denied"`
			MaxInWindow      int     `json:"max_in_window"`
			MaxWindowStart   float64 `json:"max_window_start_seconds"`
			OverLimit        int64   `json:"over_limit"`
			OverLimitPercent float64 `json:"over_limit_percent"`
			VsSlidingLog     *struct {
				Admitted    int `json:"admitted"`
				MaxInWindow int `json:"max_in_window"`
				Differing   int `json:"differing_decisions"`
			} `json:"vs_sliding_log"`
		} `json:"algorithms"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.DurationSeconds != 180 || got.Limit.Count != 100 || got.Limit.PeriodSeconds != 60 || got.Limit.Burst != 100 || got.Requests != 200 || len(got.Algorithms) != 4 {
		t.Fatalf("JSON %s", b)
	}
	fw, sw := got.Algorithms[0], got.Algorithms[2]
	if fw.Algorithm != "fixed_window" || fw.Admitted != 200 || fw.MaxInWindow != 200 || fw.OverLimit != 100 || fw.OverLimitPercent != 100 || fw.MaxWindowStart != 54 {
		t.Errorf("fixed_window: %+v", fw)
	}
	if sw.Algorithm != "sliding_window" || sw.VsSlidingLog == nil || sw.VsSlidingLog.Admitted != 9 || sw.VsSlidingLog.Differing != 9 {
		t.Errorf("sliding_window: %+v", sw)
	}
	if got.Algorithms[1].VsSlidingLog != nil {
		t.Errorf("sliding_log has a vs_sliding_log")
	}
}
