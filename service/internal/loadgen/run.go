package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/redlimit/redlimit"
)

// Defaults and bounds of [Options].
const (
	DefaultConcurrency      = 64
	DefaultDuration         = 10 * time.Second
	DefaultKeys             = 10_000
	DefaultKeyPrefix        = "bench:"
	DefaultZipfS            = 1.1
	DefaultProgressInterval = time.Second
	DefaultDrain            = 5 * time.Second
	// MaxConcurrency is the most workers a run may have. Each holds a
	// latency histogram of its own (TestRunMemory).
	MaxConcurrency = 4096
	// MaxKeys is the most keys a run may use. Every key's string is made
	// before the run, so picking one allocates nothing.
	MaxKeys = 10_000_000
)

// Bounds of the latency histograms: latencies are recorded in nanoseconds,
// from 1 ns to a minute, to three significant digits; longer ones count as
// a minute.
const (
	histMin     = 1
	histMax     = int64(time.Minute)
	histSigFigs = 3
)

// Options says what load [Run] puts on a target. The zero value of every
// field is its default.
type Options struct {
	// Concurrency is the number of workers, 1..MaxConcurrency. Each has one
	// decision in flight at a time and asks the next as soon as the last is
	// answered (a closed loop). Default DefaultConcurrency (64).
	Concurrency int
	// Duration is how long workers keep asking. Default DefaultDuration (10s).
	Duration time.Duration
	// Keys is how many distinct keys the decisions are for, 1..MaxKeys.
	// Default DefaultKeys (10,000).
	Keys int
	// KeyPrefix comes before each key's number: the keys are KeyPrefix+"0",
	// KeyPrefix+"1", ... Default DefaultKeyPrefix ("bench:").
	KeyPrefix string
	// Distribution picks the key of each decision. Default Uniform.
	Distribution Distribution
	// ZipfS is the exponent of the Zipf distribution, above 1: the larger,
	// the hotter the hottest keys. Default DefaultZipfS (1.1). Only Zipf
	// uses it.
	ZipfS float64
	// Cost is the cost of every decision, 1..redlimit.MaxCost. Default 1.
	Cost int64
	// Seed seeds the key choices: worker i draws from a PCG seeded with
	// (Seed, i), so a run's sequence of keys per worker is reproducible.
	// 0 picks a random seed.
	Seed uint64
	// Progress, if not nil, receives a progress line every
	// ProgressInterval while the run lasts (see [Run]). It is written from
	// one goroutine, and never after Run returns.
	Progress io.Writer
	// ProgressInterval is how often a progress line is written. Default
	// DefaultProgressInterval (1s).
	ProgressInterval time.Duration
	// Drain is how long decisions still running at the end of Duration may
	// take before their context is cancelled (and they count as errors).
	// Default DefaultDrain (5s).
	Drain time.Duration
	// Decisions, when above 0, sizes the run by its decisions instead of
	// its time (a benchmark's b.N). The workers ask for that many in all.
	// The run ends when the last is answered, whatever Duration says.
	Decisions int64
}

// withDefaults returns o with its defaults filled in, or an error wrapping
// ErrInvalidOptions for a field out of range.
func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Keys == 0 {
		o.Keys = DefaultKeys
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.ZipfS == 0 {
		o.ZipfS = DefaultZipfS
	}
	if o.Cost == 0 {
		o.Cost = 1
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.Drain == 0 {
		o.Drain = DefaultDrain
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return bad("concurrency %d is not in 1..%d", o.Concurrency, MaxConcurrency)
	case o.Duration < 0:
		return bad("duration %s is negative", o.Duration)
	case o.Keys < 1 || o.Keys > MaxKeys:
		return bad("keys %d is not in 1..%d", o.Keys, MaxKeys)
	case o.Distribution > Zipf:
		return bad("unknown key distribution %d", uint8(o.Distribution))
	case !(o.ZipfS > 1) || o.ZipfS > 1e6:
		return bad("zipf exponent %g is not above 1", o.ZipfS)
	case o.Cost < 1 || o.Cost > redlimit.MaxCost:
		return bad("cost %d is not in 1..%d", o.Cost, int64(redlimit.MaxCost))
	case o.ProgressInterval < 0:
		return bad("progress interval %s is negative", o.ProgressInterval)
	case o.Drain < 0:
		return bad("drain %s is negative", o.Drain)
	case o.Decisions < 0:
		return bad("decisions %d is negative", o.Decisions)
	}
	return o, nil
}

// counters are a worker's tallies, read by the progress line while the
// worker writes them; padded so that two workers' never share a cache line.
type counters struct {
	allowed, denied, errors atomic.Int64
	_                       [128 - 24]byte
}

// worker is one closed loop, with its own key picker and histogram: nothing
// is shared or locked per decision.
type worker struct {
	counters
	hist     *hdrhistogram.Histogram
	pick     *picker
	firstErr error
	errAt    time.Time
}

// run asks target until stop is set. Run sets it at the end of the
// duration, or when ctx ends. When left is not nil, run stops when the
// decisions left are made. Calls use callCtx. A failure after ctx
// has ended (the run was interrupted) is not counted.
func (w *worker) run(ctx, callCtx context.Context, target Target, keys []string, cost int64, stop *atomic.Bool, left *atomic.Int64) {
	for !stop.Load() {
		if left != nil && left.Add(-1) < 0 {
			return
		}
		key := keys[w.pick.next()]
		t0 := time.Now()
		allowed, err := target.Decide(callCtx, key, cost)
		took := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.errors.Add(1)
			if w.firstErr == nil {
				w.firstErr, w.errAt = err, t0
			}
			continue
		}
		if allowed {
			w.allowed.Add(1)
		} else {
			w.denied.Add(1)
		}
		w.hist.RecordValue(min(max(int64(took), histMin), histMax))
	}
}

// Run puts load on target as opts says and returns what it measured. The
// load is a closed loop of opts.Concurrency workers. Each decides one
// request at a time, for a key drawn from opts.Distribution. They run for
// opts.Duration, or for opts.Decisions decisions. When target is a
// [WorkerTarget], each worker asks the Target its ForWorker returns.
//
// Latencies are measured around each Decide call. So they include the
// client's own work: encoding, the network. Decisions that fail are
// counted, but not in the latency histogram. Each worker records into a
// histogram of its own, and the histograms are merged at the end.
//
// While the run lasts, a line goes to opts.Progress every
// opts.ProgressInterval. It gives the time since the start, the decisions
// per second since the last line, and the counts so far:
//
//	3.0s      52311 decisions/s  allowed 140022  denied 16911  errors 0
//
// When ctx ends before opts.Duration, Run stops early. It returns what it
// measured, with Interrupted set. Decisions cut short by ctx are not
// counted. Run returns an error, wrapping [ErrInvalidOptions], only for a
// nil target or an option out of range.
func Run(ctx context.Context, target Target, opts Options) (*Result, error) {
	if target == nil {
		return nil, fmt.Errorf("%w: no target", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	keys := make([]string, o.Keys)
	for i := range keys {
		keys[i] = o.KeyPrefix + strconv.Itoa(i)
	}
	seed := o.Seed
	if seed == 0 {
		// At most 2^53, which any JSON reader holds exactly.
		seed = 1 + rand.Uint64N(1<<53)
	}
	workers := make([]*worker, o.Concurrency)
	for i := range workers {
		workers[i] = &worker{
			hist: hdrhistogram.New(histMin, histMax, histSigFigs),
			pick: newPicker(o.Distribution, o.ZipfS, o.Keys, seed, uint64(i)),
		}
	}

	res := &Result{
		Target:       describe(target),
		Concurrency:  o.Concurrency,
		Keys:         o.Keys,
		Distribution: o.Distribution,
		Cost:         o.Cost,
		Duration:     o.Duration,
		Seed:         seed,
	}
	if o.Distribution == Zipf {
		res.ZipfS = o.ZipfS
	}
	if lt, ok := target.(*LimiterTarget); ok {
		res.Algorithm = lt.Limit.Algorithm.String()
		res.Limit = lt.Limit.String()
	}

	// Calls end with ctx, or when the drain is over.
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()

	var stop atomic.Bool
	var left *atomic.Int64
	if o.Decisions > 0 {
		left = new(atomic.Int64)
		left.Store(o.Decisions)
		res.Duration = 0
	}
	targets := make([]Target, len(workers))
	for i := range targets {
		targets[i] = target
		if wt, ok := target.(WorkerTarget); ok {
			targets[i] = wt.ForWorker(i)
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	res.Start = start.UTC().Round(0)
	for i, w := range workers {
		wg.Go(func() { w.run(ctx, callCtx, targets[i], keys, o.Cost, &stop, left) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() {
		defer close(progressDone)
		if o.Progress != nil {
			reportProgress(o.Progress, o.ProgressInterval, start, workers, stopProgress)
		}
	}()

	var end <-chan time.Time // the end of Duration; with Decisions, none
	if left == nil {
		timer := time.NewTimer(o.Duration)
		defer timer.Stop()
		end = timer.C
	}
	select {
	case <-end:
	case <-done: // the decisions are made
	case <-ctx.Done():
		res.Interrupted = true
	}
	stop.Store(true)
	drain := time.NewTimer(o.Drain)
	select {
	case <-done:
	case <-drain.C:
		cancelCalls()
		<-done
	}
	drain.Stop()
	res.Elapsed = time.Since(start)
	close(stopProgress)
	<-progressDone

	hist := hdrhistogram.New(histMin, histMax, histSigFigs)
	var errAt time.Time
	for _, w := range workers {
		res.Allowed += w.allowed.Load()
		res.Denied += w.denied.Load()
		res.Errors += w.errors.Load()
		hist.Merge(w.hist)
		if w.firstErr != nil && (res.FirstError == "" || w.errAt.Before(errAt)) {
			res.FirstError, errAt = w.firstErr.Error(), w.errAt
		}
	}
	res.Decisions = res.Allowed + res.Denied + res.Errors
	if s := res.Elapsed.Seconds(); s > 0 {
		res.Rate = float64(res.Decisions) / s
	}
	res.Latency = latencyOf(hist)
	return res, nil
}

// describe names a target: its String method's answer, or its type.
func describe(t Target) string {
	if s, ok := t.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", t)
}

// reportProgress writes a progress line every interval until stop closes.
func reportProgress(out io.Writer, interval time.Duration, start time.Time, workers []*worker, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last int64
	lastAt := start
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			var a, d, e int64
			for _, w := range workers {
				a += w.allowed.Load()
				d += w.denied.Load()
				e += w.errors.Load()
			}
			n := a + d + e
			rate := 0.0
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				rate = float64(n-last) / dt
			}
			last, lastAt = n, now
			fmt.Fprintf(out, "%7.1fs %10.0f decisions/s  allowed %d  denied %d  errors %d\n",
				now.Sub(start).Seconds(), rate, a, d, e)
		}
	}
}

// latencyOf reads the summary of h.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		Min:   time.Duration(h.Min()),
		Mean:  time.Duration(h.Mean() + 0.5),
		P50:   time.Duration(h.ValueAtPercentile(50)),
		P90:   time.Duration(h.ValueAtPercentile(90)),
		P99:   time.Duration(h.ValueAtPercentile(99)),
		P999:  time.Duration(h.ValueAtPercentile(99.9)),
		Max:   time.Duration(h.Max()),
	}
}
