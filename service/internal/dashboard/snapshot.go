package dashboard

import (
	"cmp"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// Windows of a [Snapshot].
const (
	// WindowSeconds is the length of every per-second series.
	WindowSeconds = 60
	// RateSeconds is the span the rates (per second) are averaged over.
	RateSeconds = 10
	// LatencySeconds is the span of the latency percentiles.
	LatencySeconds = 10
	// SnapshotTopKeys is how many top limited keys a snapshot lists.
	SnapshotTopKeys = 20
)

// Snapshot is what the dashboard shows at one moment, as GET /api/stats
// serves it. Every per-second series holds WindowSeconds values, oldest
// first, the last one for second End: the last complete second.
type Snapshot struct {
	Time    time.Time `json:"time"`
	Started time.Time `json:"started"`
	// End is the Unix second of the last value of every per-second series.
	End           int64 `json:"end"`
	WindowSeconds int   `json:"window_seconds"`
	RateSeconds   int   `json:"rate_seconds"`

	// Totals counts every decision since the Recorder started.
	Totals Counts `json:"totals"`
	// Rates are decisions per second over the last RateSeconds.
	Rates Rates `json:"rates"`
	// PerSecond sums every series.
	PerSecond PerSecond `json:"per_second"`
	// Series has one entry per (domain, rule), by domain then rule.
	Series []Series `json:"series"`
	// Sources has one entry per decision path, in the order of
	// redlimit.Source, every path always present.
	Sources []SourceStats `json:"sources"`
	Latency LatencyStats  `json:"latency"`
	Breaker BreakerStats  `json:"breaker"`
	Errors  ErrorStats    `json:"backend_errors"`
	// TopKeys lists the most limited (denied or shadow-denied) keys of the
	// last one to two minutes, most first; at most SnapshotTopKeys.
	TopKeys []TopKey `json:"top_keys"`
}

// Counts are numbers of decisions by outcome.
type Counts struct {
	Allowed      uint64 `json:"allowed"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
}

// Rates are decisions per second by outcome.
type Rates struct {
	Allowed      float64 `json:"allowed"`
	Denied       float64 `json:"denied"`
	ShadowDenied float64 `json:"shadow_denied"`
}

// PerSecond are decisions of each of the last WindowSeconds seconds.
type PerSecond struct {
	Allowed      []uint64 `json:"allowed"`
	Denied       []uint64 `json:"denied"`
	ShadowDenied []uint64 `json:"shadow_denied"`
}

// Series is the decisions of one (domain, rule).
type Series struct {
	Domain string `json:"domain"`
	// Rule is the rule's label, its path; Name the name its file gives
	// it, if any (Options.RuleName).
	Rule      string    `json:"rule"`
	Name      string    `json:"name,omitempty"`
	Totals    Counts    `json:"totals"`
	Rates     Rates     `json:"rates"`
	PerSecond PerSecond `json:"per_second"`
}

// SourceStats is the decisions one path made.
type SourceStats struct {
	// Source is the path's name: "store", "deny_cache", "local",
	// "fail_open", "fail_closed", or "unknown".
	Source    string   `json:"source"`
	Total     uint64   `json:"total"`
	Rate      float64  `json:"rate"`
	PerSecond []uint64 `json:"per_second"`
}

// LatencyStats is the backend's latency, in milliseconds.
type LatencyStats struct {
	// Count, P50, P90 and P99 cover the last Seconds seconds.
	Seconds int     `json:"seconds"`
	Count   uint64  `json:"count"`
	P50     float64 `json:"p50_ms"`
	P90     float64 `json:"p90_ms"`
	P99     float64 `json:"p99_ms"`
	// Per second over the window: samples, median and 99th percentile
	// (0 for a second without samples).
	CountPerSecond []uint64  `json:"count_per_second"`
	P50PerSecond   []float64 `json:"p50_per_second_ms"`
	P99PerSecond   []float64 `json:"p99_per_second_ms"`
}

// BreakerStats is the circuit breaker's state: "closed", "open",
// "half-open", or "" when there is none to report.
type BreakerStats struct {
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
}

// ErrorStats counts backend errors.
type ErrorStats struct {
	Total     uint64     `json:"total"`
	Rate      float64    `json:"rate"`
	PerSecond []uint64   `json:"per_second"`
	Last      string     `json:"last,omitempty"`
	LastAt    *time.Time `json:"last_at,omitempty"`
}

// TopKey is one of the most limited keys. Count may overestimate the true
// count by up to Error (and, for a key that was evicted from some shards'
// summaries, underestimate it).
type TopKey struct {
	Domain string `json:"domain"`
	Rule   string `json:"rule"`
	Name   string `json:"name,omitempty"` // as Series.Name
	Key    string `json:"key"`
	Count  uint64 `json:"count"`
	Error  uint64 `json:"error"`
}

// Snapshot returns what the Recorder holds now. It takes time in the
// number of series and shards, not in the number of events.
func (r *Recorder) Snapshot() Snapshot {
	if r == nil {
		return Snapshot{}
	}
	return r.snapshotAt(r.now())
}

func (r *Recorder) snapshotAt(now time.Time) Snapshot {
	end := now.Unix() - 1
	// Rates average the last RateSeconds complete seconds, or fewer since
	// the start.
	rateN := int(min(max(end-r.started.Unix(), 1), RateSeconds))
	s := Snapshot{
		Time:          now,
		Started:       r.started,
		End:           end,
		WindowSeconds: WindowSeconds,
		RateSeconds:   RateSeconds,
		PerSecond:     newPerSecond(),
		Series:        []Series{},
	}

	for _, se := range r.series.all() {
		v := Series{Domain: se.domain, Rule: se.rule, PerSecond: newPerSecond()}
		for i := range se.shards {
			sh := &se.shards[i]
			v.Totals.add(sh.total[outAllowed].Load(), sh.total[outDenied].Load(), sh.total[outShadowDenied].Load())
			sh.perSecond[outAllowed].sumInto(v.PerSecond.Allowed, end)
			sh.perSecond[outDenied].sumInto(v.PerSecond.Denied, end)
			sh.perSecond[outShadowDenied].sumInto(v.PerSecond.ShadowDenied, end)
		}
		v.Rates = Rates{
			Allowed:      rate(v.PerSecond.Allowed, rateN),
			Denied:       rate(v.PerSecond.Denied, rateN),
			ShadowDenied: rate(v.PerSecond.ShadowDenied, rateN),
		}
		s.Totals.add(v.Totals.Allowed, v.Totals.Denied, v.Totals.ShadowDenied)
		s.PerSecond.addFrom(v.PerSecond)
		s.Series = append(s.Series, v)
	}
	slices.SortFunc(s.Series, func(a, b Series) int {
		if (a.Domain == otherName) != (b.Domain == otherName) {
			if a.Domain == otherName {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Rule, b.Rule))
	})
	s.Rates = Rates{
		Allowed:      rate(s.PerSecond.Allowed, rateN),
		Denied:       rate(s.PerSecond.Denied, rateN),
		ShadowDenied: rate(s.PerSecond.ShadowDenied, rateN),
	}

	s.Sources = make([]SourceStats, numSources)
	for src := range s.Sources {
		v := &s.Sources[src]
		v.Source = redlimit.Source(src).String()
		v.PerSecond = make([]uint64, WindowSeconds)
		for i := range r.sources {
			sh := &r.sources[i]
			v.Total += sh.total[src].Load()
			sh.perSecond[src].sumInto(v.PerSecond, end)
		}
		v.Rate = rate(v.PerSecond, rateN)
	}
	// Unknown sources get a row only if there were some.
	if s.Sources[numSources-1].Total == 0 {
		s.Sources = s.Sources[:numSources-1]
	}

	s.Latency = r.latencyStats(end)

	s.Errors = ErrorStats{Total: r.errTotal.Load(), PerSecond: make([]uint64, WindowSeconds)}
	r.errPerSecond.sumInto(s.Errors.PerSecond, end)
	s.Errors.Rate = rate(s.Errors.PerSecond, rateN)
	if last := r.lastErr.Load(); last != nil {
		at := last.at
		s.Errors.Last, s.Errors.LastAt = last.msg, &at
	}

	if r.breakerState != nil {
		r.setBreaker(r.breakerState(), now)
	}
	r.breakerMu.Lock()
	s.Breaker.State = r.breaker
	if !r.breakerSince.IsZero() {
		since := r.breakerSince
		s.Breaker.Since = &since
	}
	r.breakerMu.Unlock()

	s.TopKeys = r.top.top(SnapshotTopKeys, now.UnixNano())
	return s
}

func (r *Recorder) latencyStats(end int64) LatencyStats {
	l := LatencyStats{
		Seconds:        LatencySeconds,
		CountPerSecond: make([]uint64, WindowSeconds),
		P50PerSecond:   make([]float64, WindowSeconds),
		P99PerSecond:   make([]float64, WindowSeconds),
	}
	recent, h := newLatHist(), newLatHist()
	for i := range WindowSeconds {
		sec := end - WindowSeconds + 1 + int64(i)
		h.Reset()
		for sh := range r.latency {
			r.latency[sh].addInto(h, sec)
		}
		l.CountPerSecond[i] = uint64(h.TotalCount())
		l.P50PerSecond[i] = ms(h.ValueAtQuantile(50))
		l.P99PerSecond[i] = ms(h.ValueAtQuantile(99))
		if i >= WindowSeconds-LatencySeconds {
			recent.Merge(h)
		}
	}
	l.Count = uint64(recent.TotalCount())
	l.P50, l.P90, l.P99 = ms(recent.ValueAtQuantile(50)), ms(recent.ValueAtQuantile(90)), ms(recent.ValueAtQuantile(99))
	return l
}

// ms converts nanoseconds to milliseconds.
func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

func newPerSecond() PerSecond {
	return PerSecond{
		Allowed:      make([]uint64, WindowSeconds),
		Denied:       make([]uint64, WindowSeconds),
		ShadowDenied: make([]uint64, WindowSeconds),
	}
}

func (p PerSecond) addFrom(q PerSecond) {
	for i := range p.Allowed {
		p.Allowed[i] += q.Allowed[i]
		p.Denied[i] += q.Denied[i]
		p.ShadowDenied[i] += q.ShadowDenied[i]
	}
}

func (c *Counts) add(allowed, denied, shadow uint64) {
	c.Allowed += allowed
	c.Denied += denied
	c.ShadowDenied += shadow
}

// rate averages the last n values of perSecond.
func rate(perSecond []uint64, n int) float64 {
	var sum uint64
	for _, v := range perSecond[len(perSecond)-n:] {
		sum += v
	}
	return float64(sum) / float64(n)
}
