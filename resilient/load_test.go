package resilient_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// sample is one decision made under load.
type sample struct {
	start   time.Time
	latency time.Duration
	source  redlimit.Source
	allowed bool
	key     string
	node    int // which limiter decided
	err     error
}

// loadSpec says what load runs: workers goroutines deciding in a closed
// loop, worker w on node w % len(nodes), cycling through keys, each key
// under its limit.
type loadSpec struct {
	workers int
	keys    []string
	limits  map[string]redlimit.Limit
	// deadline, if set, is each call's own context deadline, as a caller
	// such as Envoy sets it.
	deadline time.Duration
}

// load runs workers goroutines deciding on l until stop is called, which
// returns every decision made.
func load(l redlimit.Limiter, workers int, keys []string, lim redlimit.Limit) (stop func() []sample) {
	limits := map[string]redlimit.Limit{}
	for _, k := range keys {
		limits[k] = lim
	}
	return loadNodes([]redlimit.Limiter{l}, loadSpec{workers: workers, keys: keys, limits: limits})
}

// loadNodes runs spec on nodes until stop is called, which returns every
// decision made.
func loadNodes(nodes []redlimit.Limiter, spec loadSpec) (stop func() []sample) {
	done := make(chan struct{})
	results := make([][]sample, spec.workers)
	var wg sync.WaitGroup
	for w := range spec.workers {
		wg.Go(func() {
			node := w % len(nodes)
			l := nodes[node]
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				key := spec.keys[(w+i)%len(spec.keys)]
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if spec.deadline > 0 {
					ctx, cancel = context.WithTimeout(ctx, spec.deadline)
				}
				start := time.Now()
				r, err := l.AllowN(ctx, key, spec.limits[key], 1)
				lat := time.Since(start)
				cancel()
				results[w] = append(results[w], sample{start, lat, r.Source, r.Allowed, key, node, err})
				// A caller serves its request between decisions: without
				// this yield, decisions that take microseconds (an open
				// breaker's) leave the goroutines reading Redis's
				// replies waiting behind every worker's time slice.
				runtime.Gosched()
			}
		})
	}
	return func() []sample {
		close(done)
		wg.Wait()
		var all []sample
		for _, r := range results {
			all = append(all, r...)
		}
		return all
	}
}

// between returns the samples that started in [from, to).
func between(all []sample, from, to time.Time) []sample {
	var out []sample
	for _, s := range all {
		if !s.start.Before(from) && s.start.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// lateness measures how late a goroutine of this process wakes from a
// short sleep, until stop is called; stop returns the 99th percentile. A
// host starved of CPU delays every goroutine that much, whatever the
// limiter does: the latency bounds add it.
func lateness() (stop func() time.Duration) {
	const nap = time.Millisecond
	done := make(chan struct{})
	p99 := make(chan time.Duration, 1)
	go func() {
		var late []time.Duration
		for {
			select {
			case <-done:
				if len(late) == 0 {
					p99 <- 0
					return
				}
				slices.Sort(late)
				p99 <- late[len(late)*99/100]
				return
			default:
			}
			start := time.Now()
			time.Sleep(nap)
			late = append(late, time.Since(start)-nap)
		}
	}()
	return func() time.Duration { close(done); return <-p99 }
}

// p99 returns the 99th percentile latency of the samples.
func p99(ss []sample) time.Duration {
	if len(ss) == 0 {
		return 0
	}
	lat := make([]time.Duration, len(ss))
	for i, s := range ss {
		lat[i] = s.latency
	}
	slices.Sort(lat)
	return lat[len(lat)*99/100]
}

// firstFromStore returns how long after at the first decision started that
// the store answered, or -1.
func firstFromStore(all []sample, at time.Time, keep func(sample) bool) time.Duration {
	first := time.Duration(-1)
	for _, s := range all {
		if d := s.start.Sub(at); d >= 0 && (first < 0 || d < first) && s.err == nil && s.source == redlimit.FromStore && (keep == nil || keep(s)) {
			first = d
		}
	}
	return first
}

func count(ss []sample, keep func(sample) bool) int {
	n := 0
	for _, s := range ss {
		if keep(s) {
			n++
		}
	}
	return n
}

// checkNoGoroutineLeak waits for every goroutine the resilient package
// started (deadline calls) to end. The clients' own connection goroutines
// are theirs to manage and not counted.
func checkNoGoroutineLeak(t *testing.T) {
	t.Helper()
	ours := func() (int, string) {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		n := 0
		var found []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "redlimit/resilient.") && !strings.Contains(g, "resilient_test.") {
				n++
				found = append(found, g)
			}
		}
		return n, strings.Join(found, "\n\n")
	}
	if !waitFor(5*time.Second, func() bool { n, _ := ours(); return n == 0 }) {
		n, stacks := ours()
		t.Errorf("%d goroutines of the resilient package still running:\n%s", n, stacks)
	}
}

// report appends a row of a table of the reliability report when
// REDLIMIT_RELIABILITY_REPORT names a file (scripts/reliability.sh does),
// and logs it in any case. table names the table (scripts/reliability.sh
// gives each its header).
func report(t *testing.T, table, format string, args ...any) {
	t.Helper()
	line := table + "\t" + fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv("REDLIMIT_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
