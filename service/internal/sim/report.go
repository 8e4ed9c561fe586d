package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlimit/redlimit"
)

// A Report is what [Run] found: per algorithm, how many requests it
// admitted and how closely it held the limit. It renders as a table
// ([Report.WriteTable]), as JSON (it implements [json.Marshaler]) and as a
// chart ([Report.WriteSVG]).
type Report struct {
	// Pattern is the pattern's Name.
	Pattern string
	// Start is the virtual instant of the pattern's offset 0.
	Start time.Time
	// Duration is the span simulated: the pattern's Duration, or up to its
	// last arrival.
	Duration time.Duration
	// Count and Period are the limit's; Burst is the token bucket's.
	Count  int64
	Period time.Duration
	Burst  int64
	// Requests is how many requests arrived.
	Requests int
	// Algorithms holds one entry per algorithm run, in order.
	Algorithms []AlgorithmReport

	offsets []int64 // arrivals, µs from Start
}

// An AlgorithmReport is how one algorithm decided a pattern.
type AlgorithmReport struct {
	Algorithm redlimit.Algorithm
	// Limit is the limit as run, with its algorithm (and burst).
	Limit redlimit.Limit
	// Admitted and Denied count the requests.
	Admitted, Denied int
	// MaxInWindow is the most requests admitted in any interval of one
	// Period, and MaxWindowStart the offset at which the first such interval
	// begins: that of its earliest request.
	MaxInWindow    int
	MaxWindowStart time.Duration
	// OverLimit is how far MaxInWindow exceeds the limit's Count (0 if it
	// does not), and OverLimitPercent the same as a percentage of Count.
	OverLimit        int64
	OverLimitPercent float64
	// VsSlidingLog compares a sliding window counter with the exact sliding
	// log on the same arrivals; nil for the other algorithms.
	VsSlidingLog *Comparison

	allowed []bool // per arrival
}

// A Comparison is how an approximate algorithm departs from the exact
// sliding log on the same arrivals. Positive numbers mean it admitted more.
type Comparison struct {
	// Admitted is the algorithm's Admitted minus the log's.
	Admitted int
	// MaxInWindow is the algorithm's MaxInWindow minus the log's: how much
	// further it let one interval of a period go.
	MaxInWindow int
	// Differing counts the requests the two decided differently.
	Differing int
}

// WriteTable writes the report as a text table aligned with
// [text/tabwriter], a header first and the sliding window's comparison with
// the sliding log last.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	period := shortDuration(r.Period)
	fmt.Fprintf(&b, "pattern:  %s\n", r.Pattern)
	fmt.Fprintf(&b, "limit:    %d per %s", r.Count, period)
	for _, a := range r.Algorithms {
		if a.Algorithm == redlimit.TokenBucket {
			fmt.Fprintf(&b, " (token bucket burst %d)", r.Burst)
		}
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "requests: %d over %s\n\n", r.Requests, r.Duration)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ALGORITHM\tADMITTED\tDENIED\tMAX IN %s\tOVER LIMIT\tBUSIEST %s FROM\n", period, period)
	for _, a := range r.Algorithms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", a.Algorithm, a.Admitted, a.Denied, a.MaxInWindow,
			overText(a.OverLimit, a.OverLimitPercent), a.MaxWindowStart.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range r.Algorithms {
		if c := a.VsSlidingLog; c != nil {
			fmt.Fprintf(&b, "\n%s vs the exact sliding_log: %+d admitted, %+d in the busiest %s, %d of %d decisions differ\n",
				a.Algorithm, c.Admitted, c.MaxInWindow, period, c.Differing, r.Requests)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func overText(over int64, pct float64) string {
	if over == 0 {
		return "0"
	}
	return fmt.Sprintf("+%d (%.1f%%)", over, pct)
}

// shortDuration writes whole hours, minutes and seconds without zero units
// ("1m", "1h"), as redlimit.Limit's String does, and other durations as
// time.Duration does.
func shortDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// The JSON form: snake_case names, durations in seconds.
type (
	jsonReport struct {
		Pattern         string          `json:"pattern"`
		Start           time.Time       `json:"start"`
		DurationSeconds float64         `json:"duration_seconds"`
		Limit           jsonLimit       `json:"limit"`
		Requests        int             `json:"requests"`
		Algorithms      []jsonAlgorithm `json:"algorithms"`
	}
	jsonLimit struct {
		Count         int64   `json:"count"`
		PeriodSeconds float64 `json:"period_seconds"`
		Burst         int64   `json:"burst"`
	}
	jsonAlgorithm struct {
		Algorithm             redlimit.Algorithm `json:"algorithm"`
		Admitted              int                `json:"admitted"`
		Denied                int                `json:"denied"`
		MaxInWindow           int                `json:"max_in_window"`
		MaxWindowStartSeconds float64            `json:"max_window_start_seconds"`
		OverLimit             int64              `json:"over_limit"`
		OverLimitPercent      float64            `json:"over_limit_percent"`
		VsSlidingLog          *jsonComparison    `json:"vs_sliding_log,omitempty"`
	}
	jsonComparison struct {
		Admitted    int `json:"admitted"`
		MaxInWindow int `json:"max_in_window"`
		Differing   int `json:"differing_decisions"`
	}
)

// MarshalJSON implements [json.Marshaler]: snake_case names, durations in
// seconds, such as
//
//	{"pattern": "...", "start": "2024-01-01T00:00:00Z", "duration_seconds": 180,
//	 "limit": {"count": 100, "period_seconds": 60, "burst": 100}, "requests": 200,
//	 "algorithms": [{"algorithm": "fixed_window", "admitted": 200, "denied": 0,
//	   "max_in_window": 200, "max_window_start_seconds": 54, "over_limit": 100,
//	   "over_limit_percent": 100}, ...]}
//
// A sliding_window entry also has "vs_sliding_log": {"admitted", "max_in_window",
// "differing_decisions"}.
func (r *Report) MarshalJSON() ([]byte, error) {
	j := jsonReport{
		Pattern:         r.Pattern,
		Start:           r.Start,
		DurationSeconds: r.Duration.Seconds(),
		Limit:           jsonLimit{Count: r.Count, PeriodSeconds: r.Period.Seconds(), Burst: r.Burst},
		Requests:        r.Requests,
		Algorithms:      make([]jsonAlgorithm, len(r.Algorithms)),
	}
	for i, a := range r.Algorithms {
		ja := jsonAlgorithm{
			Algorithm:             a.Algorithm,
			Admitted:              a.Admitted,
			Denied:                a.Denied,
			MaxInWindow:           a.MaxInWindow,
			MaxWindowStartSeconds: a.MaxWindowStart.Seconds(),
			OverLimit:             a.OverLimit,
			OverLimitPercent:      a.OverLimitPercent,
		}
		if c := a.VsSlidingLog; c != nil {
			ja.VsSlidingLog = &jsonComparison{Admitted: c.Admitted, MaxInWindow: c.MaxInWindow, Differing: c.Differing}
		}
		j.Algorithms[i] = ja
	}
	return json.Marshal(j)
}

// WriteJSON writes the report as indented JSON (see [Report.MarshalJSON])
// and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
