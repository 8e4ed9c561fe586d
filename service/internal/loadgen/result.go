package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Result is what a [Run] measured.
//
// In JSON (see [Result.MarshalJSON]) durations are microseconds, as
// numbers with up to three decimals, in fields ending in "_us"; the field
// names are stable.
type Result struct {
	// Target describes the target: its String method, or its type.
	Target string
	// Algorithm and Limit describe the limit of a [LimiterTarget], such as
	// "sliding_window" and "100/1s sliding_window"; "" for a service,
	// whose configuration holds the limits.
	Algorithm, Limit string
	// Concurrency, Keys, Distribution, ZipfS (0 unless Zipf), Cost and
	// Duration (0 for a run of Options.Decisions) are the options the run
	// had; Seed the seed of its key choices.
	Concurrency  int
	Keys         int
	Distribution Distribution
	ZipfS        float64
	Cost         int64
	Duration     time.Duration
	Seed         uint64
	// Start is when the run started, in UTC.
	Start time.Time
	// Elapsed is the time from the start until the last decision came
	// back: Duration, plus the decisions still running at its end.
	Elapsed time.Duration
	// Decisions = Allowed + Denied + Errors.
	Decisions, Allowed, Denied, Errors int64
	// Rate is Decisions per second of Elapsed.
	Rate float64
	// Latency summarizes the latencies of the answered (allowed or denied)
	// decisions.
	Latency Latency
	// FirstError is the message of the first error, "" without errors.
	FirstError string
	// Interrupted reports that the run's context ended before Duration.
	Interrupted bool
}

// Latency summarizes a latency histogram. Percentiles are the highest value
// equivalent to the recorded ones (HDR histograms keep three significant
// digits), so P50 <= P90 <= P99 <= P999 <= Max. All are zero when Count is.
type Latency struct {
	Count                          int64
	Min, Mean, P50, P90, P99, P999 time.Duration
	Max                            time.Duration
}

// micros is a duration written in JSON as microseconds.
type micros time.Duration

func (d micros) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(d)/1e3, 'f', -1, 64), nil
}

func (d *micros) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("loadgen: a duration in µs: %w", err)
	}
	if math.IsNaN(f) || math.Abs(f*1e3) > math.MaxInt64 {
		return fmt.Errorf("loadgen: duration %s µs is out of range", b)
	}
	*d = micros(math.Round(f * 1e3))
	return nil
}

type latencyJSON struct {
	Count int64  `json:"count"`
	Min   micros `json:"min_us"`
	Mean  micros `json:"mean_us"`
	P50   micros `json:"p50_us"`
	P90   micros `json:"p90_us"`
	P99   micros `json:"p99_us"`
	P999  micros `json:"p99_9_us"`
	Max   micros `json:"max_us"`
}

type resultJSON struct {
	Target       string       `json:"target"`
	Algorithm    string       `json:"algorithm,omitempty"`
	Limit        string       `json:"limit,omitempty"`
	Concurrency  int          `json:"concurrency"`
	Keys         int          `json:"keys"`
	Distribution Distribution `json:"distribution"`
	ZipfS        float64      `json:"zipf_s,omitempty"`
	Cost         int64        `json:"cost"`
	Duration     micros       `json:"duration_us"`
	Seed         uint64       `json:"seed"`
	Start        time.Time    `json:"start"`
	Elapsed      micros       `json:"elapsed_us"`
	Decisions    int64        `json:"decisions"`
	Allowed      int64        `json:"allowed"`
	Denied       int64        `json:"denied"`
	Errors       int64        `json:"errors"`
	Rate         float64      `json:"decisions_per_second"`
	Latency      latencyJSON  `json:"latency"`
	FirstError   string       `json:"first_error,omitempty"`
	Interrupted  bool         `json:"interrupted,omitempty"`
}

// MarshalJSON writes r with these fields, durations in microseconds:
//
//	{"target": "memory", "algorithm": "sliding_window", "limit": "100/1s sliding_window",
//	 "concurrency": 64, "keys": 10000, "distribution": "uniform", "zipf_s": 1.1, "cost": 1,
//	 "duration_us": 10000000, "seed": 42, "start": "2026-12-03T10:00:00Z", "elapsed_us": 10000170.5,
//	 "decisions": 1200000, "allowed": 1100000, "denied": 100000, "errors": 0,
//	 "decisions_per_second": 119998,
//	 "latency": {"count": 1200000, "min_us": 0.2, "mean_us": 510.3, "p50_us": 420.5,
//	             "p90_us": 800.7, "p99_us": 1500.2, "p99_9_us": 4000.1, "max_us": 12000.5},
//	 "first_error": "...", "interrupted": true}
//
// algorithm, limit, zipf_s, first_error and interrupted are left out when
// empty.
func (r Result) MarshalJSON() ([]byte, error) {
	l := r.Latency
	return json.Marshal(resultJSON{
		Target: r.Target, Algorithm: r.Algorithm, Limit: r.Limit,
		Concurrency: r.Concurrency, Keys: r.Keys, Distribution: r.Distribution, ZipfS: r.ZipfS,
		Cost: r.Cost, Duration: micros(r.Duration), Seed: r.Seed, Start: r.Start, Elapsed: micros(r.Elapsed),
		Decisions: r.Decisions, Allowed: r.Allowed, Denied: r.Denied, Errors: r.Errors, Rate: r.Rate,
		Latency: latencyJSON{
			Count: l.Count, Min: micros(l.Min), Mean: micros(l.Mean), P50: micros(l.P50), P90: micros(l.P90),
			P99: micros(l.P99), P999: micros(l.P999), Max: micros(l.Max),
		},
		FirstError: r.FirstError, Interrupted: r.Interrupted,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	l := j.Latency
	*r = Result{
		Target: j.Target, Algorithm: j.Algorithm, Limit: j.Limit,
		Concurrency: j.Concurrency, Keys: j.Keys, Distribution: j.Distribution, ZipfS: j.ZipfS,
		Cost: j.Cost, Duration: time.Duration(j.Duration), Seed: j.Seed, Start: j.Start,
		Elapsed:   time.Duration(j.Elapsed),
		Decisions: j.Decisions, Allowed: j.Allowed, Denied: j.Denied, Errors: j.Errors, Rate: j.Rate,
		Latency: Latency{
			Count: l.Count, Min: time.Duration(l.Min), Mean: time.Duration(l.Mean),
			P50: time.Duration(l.P50), P90: time.Duration(l.P90), P99: time.Duration(l.P99),
			P999: time.Duration(l.P999), Max: time.Duration(l.Max),
		},
		FirstError: j.FirstError, Interrupted: j.Interrupted,
	}
	return nil
}

// WriteSummary writes r for people to read:
//
//	target       memory
//	limit        100/1s sliding_window
//	load         64 workers, 10000 keys (uniform), cost 1, for 10s
//	elapsed      10.000s
//	decisions    12000000  (1200000/s)
//	allowed      11000000  (91.7%)
//	denied       1000000  (8.3%)
//	errors       0
//	latency      p50 41.2µs  p90 80.1µs  p99 150µs  p99.9 402µs  max 12.1ms  (mean 50.3µs)
func (r *Result) WriteSummary(w io.Writer) error {
	var b strings.Builder
	line := func(name, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s "+format+"\n", append([]any{name}, args...)...)
	}
	line("target", "%s", r.Target)
	if r.Limit != "" {
		line("limit", "%s", r.Limit)
	}
	dist := r.Distribution.String()
	if r.Distribution == Zipf {
		dist += fmt.Sprintf(", s=%g", r.ZipfS)
	}
	line("load", "%d workers, %d keys (%s), cost %d, for %s", r.Concurrency, r.Keys, dist, r.Cost, r.Duration)
	elapsed := fmt.Sprintf("%.3fs", r.Elapsed.Seconds())
	if r.Interrupted {
		elapsed += " (interrupted)"
	}
	line("elapsed", "%s", elapsed)
	line("decisions", "%d  (%.0f/s)", r.Decisions, r.Rate)
	line("allowed", "%d  (%s)", r.Allowed, percent(r.Allowed, r.Decisions))
	line("denied", "%d  (%s)", r.Denied, percent(r.Denied, r.Decisions))
	if r.FirstError != "" {
		line("errors", "%d  (first: %s)", r.Errors, r.FirstError)
	} else {
		line("errors", "%d", r.Errors)
	}
	l := r.Latency
	if l.Count > 0 {
		line("latency", "p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s)",
			short(l.P50), short(l.P90), short(l.P99), short(l.P999), short(l.Max), short(l.Mean))
	} else {
		line("latency", "no decision answered")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// percent returns n/of as a percentage with one decimal.
func percent(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// short writes d with three significant digits: "812ns", "41.2µs", "1.50ms".
func short(d time.Duration) string {
	var v float64
	var unit string
	switch {
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		v, unit = float64(d)/1e3, "µs"
	case d < time.Second:
		v, unit = float64(d)/1e6, "ms"
	default:
		v, unit = d.Seconds(), "s"
	}
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + unit
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + unit
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + unit
}
