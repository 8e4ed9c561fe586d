package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// allAlgorithms is the order reports show the algorithms in.
var allAlgorithms = []redlimit.Algorithm{
	redlimit.FixedWindow,
	redlimit.SlidingLog,
	redlimit.SlidingWindow,
	redlimit.TokenBucket,
}

// Options adjusts a simulation. The zero value, and a nil *Options, run
// every algorithm.
type Options struct {
	// Algorithms are the algorithms to run, in the order the report shows
	// them. Nil or empty means all four: fixed_window, sliding_log,
	// sliding_window and token_bucket.
	Algorithms []redlimit.Algorithm
}

// Run replays p through each algorithm under limit and reports what each
// admitted. Only limit's Count and Period are used, and Burst. Burst sizes
// the token bucket; zero means Count. Its Algorithm is ignored, since
// every algorithm is run.
//
// The requests are decided by a [memory.Store] whose clock is set to each
// arrival in turn, one key per algorithm. So nothing sleeps: a simulation
// takes as long as its decisions. Sliding window results are compared
// with the exact sliding log. Run also runs the log for that purpose when
// it is not among the algorithms asked for.
//
// Run returns an error wrapping [ErrInvalidPattern] for a pattern it
// cannot replay. It returns one wrapping a redlimit sentinel error (such
// as [redlimit.ErrInvalidLimit]) for a limit an algorithm cannot use. It
// returns ctx's error if ctx is done first.
func Run(ctx context.Context, limit redlimit.Limit, p Pattern, opts *Options) (*Report, error) {
	algs := allAlgorithms
	if opts != nil && len(opts.Algorithms) > 0 {
		algs = opts.Algorithms
	}
	limits := make([]redlimit.Limit, len(algs))
	for i, a := range algs {
		if !a.Valid() {
			return nil, fmt.Errorf("sim: %w: %d", redlimit.ErrUnknownAlgorithm, uint8(a))
		}
		if slices.Index(algs, a) < i {
			return nil, fmt.Errorf("sim: %s listed twice", a)
		}
		l, err := algorithmLimit(limit, a)
		if err != nil {
			return nil, err
		}
		limits[i] = l
	}
	if err := p.validate(); err != nil {
		return nil, err
	}

	// The decisions to make: the algorithms asked for, and the sliding log
	// if the sliding window needs it for comparison.
	run := limits
	logIdx := slices.Index(algs, redlimit.SlidingLog)
	if logIdx < 0 && slices.Contains(algs, redlimit.SlidingWindow) {
		l, err := algorithmLimit(limit, redlimit.SlidingLog)
		if err != nil {
			return nil, fmt.Errorf("%w (the sliding window is compared with the sliding log: leave sliding_window out, or lower the count)", err)
		}
		run = append(slices.Clip(limits), l)
		logIdx = len(run) - 1
	}

	offs := make([]int64, len(p.Offsets))
	for i, off := range p.Offsets {
		offs[i] = off.Microseconds()
	}
	start := p.Start
	if start.IsZero() {
		start = alignedStart(limit.Period)
	}
	startUS := start.UnixMicro()

	// The sweeper is off, so the clock is only read from this goroutine.
	var now int64
	store, err := memory.New(
		memory.WithClock(func() time.Time { return time.UnixMicro(now) }),
		memory.WithSweepInterval(0),
	)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	defer store.Close()

	allowed := make([][]bool, len(run))
	for j := range run {
		allowed[j] = make([]bool, len(offs))
	}
	for i, off := range offs {
		now = startUS + off
		for j, l := range run {
			res, err := store.AllowN(ctx, "sim", l, 1)
			if err != nil {
				return nil, fmt.Errorf("sim: %s at %s: %w", l.Algorithm, time.Duration(off)*time.Microsecond, err)
			}
			allowed[j][i] = res.Allowed
		}
	}

	r := &Report{
		Pattern:  p.Name,
		Start:    start.UTC(),
		Duration: time.Duration(p.span()) * time.Microsecond,
		Count:    limit.Count,
		Period:   limit.Period,
		Burst:    burstOf(limit),
		Requests: len(offs),
		offsets:  offs,
	}
	for j, l := range limits {
		r.Algorithms = append(r.Algorithms, summarize(l, offs, allowed[j]))
	}
	if logIdx >= 0 {
		logged := summarize(run[logIdx], offs, allowed[logIdx])
		for j := range r.Algorithms {
			a := &r.Algorithms[j]
			if a.Algorithm == redlimit.SlidingWindow {
				a.VsSlidingLog = compare(a, &logged, allowed[j], allowed[logIdx])
			}
		}
	}
	return r, nil
}

// burstOf returns the token bucket's burst for limit: Burst, or Count.
func burstOf(limit redlimit.Limit) int64 {
	if limit.Burst > 0 {
		return limit.Burst
	}
	return limit.Count
}

// algorithmLimit returns limit counted by a, checked.
func algorithmLimit(limit redlimit.Limit, a redlimit.Algorithm) (redlimit.Limit, error) {
	l := redlimit.Limit{Algorithm: a, Count: limit.Count, Period: limit.Period}
	if a == redlimit.TokenBucket {
		l.Burst = burstOf(limit)
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("sim: %s: %w", a, err)
	}
	return l, nil
}

// alignedStart returns the instant simulations start at by default: the
// start of the fixed window of period that holds 2024-01-01T00:00:00Z.
func alignedStart(period time.Duration) time.Time {
	base := time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	if p := period.Microseconds(); p > 0 {
		base -= base % p
	}
	return time.UnixMicro(base).UTC()
}

// summarize counts one algorithm's decisions.
func summarize(l redlimit.Limit, offs []int64, allowed []bool) AlgorithmReport {
	admitted := make([]int64, 0, len(offs))
	for i, ok := range allowed {
		if ok {
			admitted = append(admitted, offs[i])
		}
	}
	a := AlgorithmReport{
		Algorithm: l.Algorithm,
		Limit:     l,
		Admitted:  len(admitted),
		Denied:    len(offs) - len(admitted),
		allowed:   allowed,
	}
	most, from := maxInWindow(admitted, l.Period.Microseconds())
	a.MaxInWindow = most
	a.MaxWindowStart = time.Duration(from) * time.Microsecond
	if over := int64(most) - l.Count; over > 0 {
		a.OverLimit = over
		a.OverLimitPercent = 100 * float64(over) / float64(l.Count)
	}
	return a
}

// compare returns a's departure from the sliding log's decisions.
func compare(a, log *AlgorithmReport, allowed, logAllowed []bool) *Comparison {
	c := &Comparison{
		Admitted:    a.Admitted - log.Admitted,
		MaxInWindow: a.MaxInWindow - log.MaxInWindow,
	}
	for i := range allowed {
		if allowed[i] != logAllowed[i] {
			c.Differing++
		}
	}
	return c
}
