package dashboard

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// t0 is a whole second, so that t0.Add(d) lands in second t0+d/1s.
var t0 = time.Unix(1_700_000_000, 0)

// clock is a settable clock, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.set(t)
	return c
}

func (c *clock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func at(d time.Duration) time.Time       { return t0.Add(d) }
func secs(f float64) time.Duration       { return time.Duration(f * float64(time.Second)) }
func last[T any](s []T, n int) []T       { return s[len(s)-n:] }
func newTestRecorder(c *clock) *Recorder { return NewRecorder(RecorderOptions{Now: c.now}) }

func observe(r *Recorder, when time.Time, n int, e Event) {
	for range n {
		r.observeAt(when, e)
	}
}

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s = %v, want %v", what, got, want)
			return
		}
	}
}

func TestRecorderCounts(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	api := Event{Domain: "api", Rule: "api.ip", Key: "10.0.0.1"}
	observe(r, at(secs(0.5)), 3, Event{Domain: "api", Rule: "api.ip", Key: "10.0.0.1", Allowed: true})
	observe(r, at(secs(0.6)), 2, api)
	observe(r, at(secs(1.2)), 1, Event{Domain: "api", Rule: "api.ip", Key: "10.0.0.2", Shadow: true})
	observe(r, at(secs(1.5)), 4, Event{Domain: "auth", Rule: "auth.user", Key: "bob", Allowed: true, Source: redlimit.FromLocal})
	observe(r, at(secs(1.7)), 5, Event{Domain: "auth", Rule: "auth.user", Key: "eve", Source: redlimit.FromDenyCache})
	// Allowed in shadow mode is plain allowed.
	observe(r, at(secs(2.5)), 1, Event{Domain: "api", Rule: "api.ip", Key: "10.0.0.3", Allowed: true, Shadow: true})

	c.set(at(secs(3.1))) // End is second t0+2
	s := r.Snapshot()
	if s.End != t0.Unix()+2 || s.WindowSeconds != 60 || len(s.PerSecond.Allowed) != 60 {
		t.Fatalf("End %d, window %d, %d values; want %d, 60, 60", s.End, s.WindowSeconds, len(s.PerSecond.Allowed), t0.Unix()+2)
	}
	if len(s.Series) != 2 || s.Series[0].Domain != "api" || s.Series[1].Domain != "auth" {
		t.Fatalf("series %+v, want api then auth", s.Series)
	}
	a, b := s.Series[0], s.Series[1]
	equal(t, "api allowed", last(a.PerSecond.Allowed, 3), []uint64{3, 0, 1})
	equal(t, "api denied", last(a.PerSecond.Denied, 3), []uint64{2, 0, 0})
	equal(t, "api shadow-denied", last(a.PerSecond.ShadowDenied, 3), []uint64{0, 1, 0})
	equal(t, "auth allowed", last(b.PerSecond.Allowed, 3), []uint64{0, 4, 0})
	equal(t, "auth denied", last(b.PerSecond.Denied, 3), []uint64{0, 5, 0})
	equal(t, "all denied", last(s.PerSecond.Denied, 3), []uint64{2, 5, 0})
	if want := (Counts{Allowed: 4, Denied: 2, ShadowDenied: 1}); a.Totals != want {
		t.Errorf("api totals %+v, want %+v", a.Totals, want)
	}
	if want := (Counts{Allowed: 8, Denied: 7, ShadowDenied: 1}); s.Totals != want {
		t.Errorf("totals %+v, want %+v", s.Totals, want)
	}
	// Two complete seconds since the start: rates average those.
	if want := (Rates{Allowed: 2.5, Denied: 2.5, ShadowDenied: 0.5}); s.Rates != want {
		t.Errorf("rates %+v, want %+v", s.Rates, want)
	}

	bySource := map[string]uint64{}
	for _, v := range s.Sources {
		bySource[v.Source] = v.Total
	}
	names := make([]string, len(s.Sources))
	for i, v := range s.Sources {
		names[i] = v.Source
	}
	equal(t, "sources", names, []string{"store", "deny_cache", "local", "fail_open", "fail_closed", "undecided"})
	if bySource["store"] != 7 || bySource["local"] != 4 || bySource["deny_cache"] != 5 {
		t.Errorf("by source %v, want store 7, local 4, deny_cache 5", bySource)
	}

	// Later, rates average the last ten seconds (t0+1 … t0+10): second
	// t0 has left them.
	c.set(at(secs(11.5)))
	s = r.Snapshot()
	if got := s.Series[0].Rates.Allowed; got != 0.1 {
		t.Errorf("api allowed rate %v after 11 s, want 0.1", got)
	}
}

// Seconds older than the window drop out; totals stay; a slot reused a
// minute later counts afresh.
func TestRecorderWindow(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	e := Event{Domain: "d", Rule: "d.k", Allowed: true}
	observe(r, at(0), 7, e)
	observe(r, at(secs(1.5)), 1, e)
	// The second being counted does not clobber the window's first.
	observe(r, at(secs(61.5)), 3, e)
	c.set(at(secs(61.5))) // End = t0+60: the window is t0+1 … t0+60
	s := r.Snapshot()
	if ps := s.Series[0].PerSecond.Allowed; ps[0] != 1 {
		t.Errorf("first second of the window counts %d, want 1", ps[0])
	}

	observe(r, at(secs(ringLen+0.5)), 2, e) // the same slot as t0
	c.set(at(secs(ringLen + 1.5)))
	s = r.Snapshot()
	ps := s.Series[0].PerSecond.Allowed
	var sum uint64
	for _, v := range ps {
		sum += v
	}
	if sum != 5 || ps[59] != 2 {
		t.Errorf("window sums to %d, last %d; want 5, 2", sum, ps[59])
	}
	if s.Totals.Allowed != 13 {
		t.Errorf("total %d, want 13", s.Totals.Allowed)
	}

	c.set(at(10 * time.Minute))
	s = r.Snapshot()
	for _, v := range s.Series[0].PerSecond.Allowed {
		if v != 0 {
			t.Fatalf("per second %v ten minutes later, want zeros", s.Series[0].PerSecond.Allowed)
		}
	}
}

func TestRecorderLatency(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	// 1000 calls of 1 µs … 1000 µs in second t0+5, and events without
	// latency, which are not counted.
	for i := 1; i <= 1000; i++ {
		r.observeAt(at(secs(5.5)), Event{Domain: "d", Rule: "r", Allowed: true, Latency: time.Duration(i) * time.Microsecond})
	}
	observe(r, at(secs(5.5)), 500, Event{Domain: "d", Rule: "r", Allowed: true})

	c.set(at(secs(6.2)))
	l := r.Snapshot().Latency
	if l.Count != 1000 || l.CountPerSecond[59] != 1000 || l.Seconds != LatencySeconds {
		t.Fatalf("count %d (last second %d), want 1000", l.Count, l.CountPerSecond[59])
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if got < want*0.88 || got > want*1.12 {
			t.Errorf("%s = %.3f ms, want %.3f ms ± 12%%", what, got, want)
		}
	}
	near("p50", l.P50, 0.5)
	near("p90", l.P90, 0.9)
	near("p99", l.P99, 0.99)
	near("p50 of the last second", l.P50PerSecond[59], 0.5)
	near("p99 of the last second", l.P99PerSecond[59], 0.99)
	if l.P50PerSecond[58] != 0 || l.CountPerSecond[58] != 0 {
		t.Errorf("second without calls: p50 %v, count %d; want 0, 0", l.P50PerSecond[58], l.CountPerSecond[58])
	}

	// Past LatencySeconds, the percentiles are empty; the chart still has it.
	c.set(at(secs(6.2 + LatencySeconds)))
	l = r.Snapshot().Latency
	if l.Count != 0 || l.P99 != 0 || l.CountPerSecond[59-LatencySeconds] != 1000 {
		t.Errorf("after %d s: count %d, p99 %v, chart count %d; want 0, 0, 1000", LatencySeconds, l.Count, l.P99, l.CountPerSecond[59-LatencySeconds])
	}
}

// Latency records one sample per call, apart from the events.
func TestRecorderLatencyPerCall(t *testing.T) {
	c := newClock(at(secs(3.5)))
	r := newTestRecorder(c)
	for _, d := range []time.Duration{2 * time.Millisecond, 0, -time.Millisecond, 4 * time.Millisecond} {
		r.Latency(d) // 0 and negative are not measured
	}
	observe(r, at(secs(3.5)), 10, Event{Domain: "d", Rule: "r", Allowed: true}) // no latency of their own
	var nilRec *Recorder
	nilRec.Latency(time.Second) // a no-op
	c.set(at(secs(4.2)))
	l := r.Snapshot().Latency
	if l.Count != 2 || l.CountPerSecond[59] != 2 {
		t.Fatalf("count %d (last second %d), want 2", l.Count, l.CountPerSecond[59])
	}
	if l.P50 < 2*0.88 || l.P99 > 4*1.12 {
		t.Errorf("p50 %.3f ms, p99 %.3f ms, want 2 to 4 ms", l.P50, l.P99)
	}
}

// A sample past the histogram's range counts as its longest, latMax.
func TestRecorderLatencyTooLong(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	c.set(at(secs(3.5)))
	r.Latency(time.Hour)
	r.Latency(time.Nanosecond)
	c.set(at(secs(4.2)))
	l := r.Snapshot().Latency
	if want := ms(latMax); l.Count != 2 || l.P99 < want || l.P99 > want*1.07 {
		t.Errorf("count %d, p99 %.0f ms; want 2, %.0f ms", l.Count, l.P99, want)
	}
}

func TestRecorderBreaker(t *testing.T) {
	c := newClock(t0)
	var state atomic.Value
	state.Store("closed")
	r := NewRecorder(RecorderOptions{Now: c.now, BreakerState: func() string { return state.Load().(string) }})
	b := r.Snapshot().Breaker
	if b.State != "closed" || b.Since == nil || !b.Since.Equal(t0) {
		t.Errorf("breaker %+v, want closed since t0", b)
	}
	c.set(at(5 * time.Second))
	state.Store("open")
	if b := r.Snapshot().Breaker; b.State != "open" || !b.Since.Equal(at(5*time.Second)) {
		t.Errorf("breaker %+v, want open since t0+5s", b)
	}
	c.set(at(9 * time.Second))
	if b := r.Snapshot().Breaker; b.State != "open" || !b.Since.Equal(at(5*time.Second)) {
		t.Errorf("breaker %+v, want still open since t0+5s", b)
	}

	// Pushed states, without a BreakerState func.
	r = newTestRecorder(c)
	if b := r.Snapshot().Breaker; b.State != "" || b.Since != nil {
		t.Errorf("breaker %+v with none reported, want empty", b)
	}
	r.SetBreakerState("half-open")
	if b := r.Snapshot().Breaker; b.State != "half-open" {
		t.Errorf("breaker %+v, want half-open", b)
	}
}

func TestRecorderBackendErrors(t *testing.T) {
	c := newClock(at(secs(0.5)))
	r := newTestRecorder(c)
	r.BackendError(errors.New("dial tcp: connection refused"))
	r.BackendError(nil) // ignored
	c.set(at(secs(1.5)))
	r.BackendError(errors.New("i/o timeout"))
	r.BackendError(errors.New(strings.Repeat("x", 5000)))
	c.set(at(secs(2.5)))
	e := r.Snapshot().Errors
	if e.Total != 3 {
		t.Errorf("total %d, want 3", e.Total)
	}
	equal(t, "per second", last(e.PerSecond, 2), []uint64{1, 2})
	// The message is kept once a second: the second error of second 1 is
	// counted but not kept.
	if e.Last != "i/o timeout" || e.LastAt == nil || !e.LastAt.Equal(at(secs(1.5))) {
		t.Errorf("last %q at %v, want i/o timeout at t0+1.5s", e.Last, e.LastAt)
	}
	c.set(at(secs(3.5)))
	r.BackendError(errors.New(strings.Repeat("y", 5000)))
	if e := r.Snapshot().Errors; len(e.Last) > maxErrorLen {
		t.Errorf("last error kept %d bytes, want at most %d", len(e.Last), maxErrorLen)
	}
}

func TestRecorderMaxSeries(t *testing.T) {
	c := newClock(t0)
	r := NewRecorder(RecorderOptions{Now: c.now, MaxSeries: 2})
	for _, rule := range []string{"d.a", "d.b", "d.c", "d.d", "d.a"} {
		r.Observe(Event{Domain: "d", Rule: rule, Allowed: true})
	}
	s := r.Snapshot()
	var got []string
	for _, v := range s.Series {
		got = append(got, v.Rule)
	}
	equal(t, "rules", got, []string{"d.a", "d.b", otherName})
	if o := s.Series[2]; o.Domain != otherName || o.Totals.Allowed != 2 {
		t.Errorf("other series %+v, want domain %q, 2 allowed", o, otherName)
	}
}

func TestRecorderLongLabels(t *testing.T) {
	r := newTestRecorder(newClock(t0))
	long := strings.Repeat("é", 1000) // 2000 bytes
	r.Observe(Event{Domain: long, Rule: long, Key: long})
	s := r.Snapshot()
	if n := len(s.Series[0].Domain); n > maxLabelLen {
		t.Errorf("domain kept %d bytes, want at most %d", n, maxLabelLen)
	}
	if k := s.TopKeys[0].Key; len(k) > maxLabelLen || !strings.HasPrefix(long, k) {
		t.Errorf("key kept %d bytes, want a prefix of at most %d", len(k), maxLabelLen)
	}
}

func TestRecorderUnknownSource(t *testing.T) {
	r := newTestRecorder(newClock(t0))
	r.Observe(Event{Domain: "d", Rule: "r", Allowed: true, Source: redlimit.Source(200)})
	s := r.Snapshot()
	if v := s.Sources[len(s.Sources)-1]; v.Source != "unknown" || v.Total != 1 {
		t.Errorf("last source %+v, want unknown: 1", v)
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Observe(Event{Domain: "d"})
	r.BackendError(errors.New("x"))
	r.SetBreakerState("open")
	if s := r.Snapshot(); s.Totals != (Counts{}) {
		t.Errorf("nil recorder snapshot %+v", s)
	}
}

// Many goroutines observing while others read snapshots: no race (run
// with -race), and no event lost.
func TestRecorderConcurrent(t *testing.T) {
	c := newClock(at(secs(0.5)))
	r := NewRecorder(RecorderOptions{Now: c.now, BreakerState: func() string { return "closed" }})
	const workers, each = 8, 6000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				r.Snapshot()
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			rule := []string{"api.ip", "api.user"}[w%2]
			for i := range each {
				r.Observe(Event{
					Domain:  "api",
					Rule:    rule,
					Key:     "k" + string(rune('a'+i%7)),
					Allowed: i%4 != 0,
					Source:  redlimit.Source(i % 6),
					Latency: time.Duration(i%900+100) * time.Microsecond,
				})
				if i%1000 == 0 {
					r.BackendError(errors.New("timeout"))
					r.SetBreakerState("open")
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	c.set(at(secs(1.5)))
	s := r.Snapshot()
	const total = workers * each
	if got := s.Totals.Allowed + s.Totals.Denied; got != total || s.Totals.Denied != total/4 {
		t.Errorf("totals %+v, want %d decisions, %d denied", s.Totals, total, total/4)
	}
	if got := s.PerSecond.Allowed[59] + s.PerSecond.Denied[59]; got != total {
		t.Errorf("last second counts %d, want %d", got, total)
	}
	var bySource uint64
	for _, v := range s.Sources {
		bySource += v.Total
		if v.Total != total/6 {
			t.Errorf("source %s: %d, want %d", v.Source, v.Total, total/6)
		}
	}
	if s.Latency.Count != total {
		t.Errorf("latency count %d, want %d", s.Latency.Count, total)
	}
	if s.Errors.Total != workers*each/1000 {
		t.Errorf("errors %d, want %d", s.Errors.Total, workers*each/1000)
	}
	var denials uint64
	for _, k := range s.TopKeys {
		denials += k.Count
	}
	if denials != total/4 {
		t.Errorf("top keys count %d denials, want %d (fewer keys than counters: exact)", denials, total/4)
	}
}

func BenchmarkObserve(b *testing.B) {
	r := NewRecorder(RecorderOptions{})
	b.Run("allowed", func(b *testing.B) {
		e := Event{Domain: "api", Rule: "api.remote_address", Key: "10.0.0.1", Allowed: true, Latency: 300 * time.Microsecond}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Observe(e)
			}
		})
	})
	b.Run("denied", func(b *testing.B) {
		e := Event{Domain: "api", Rule: "api.remote_address", Key: "10.0.0.1", Source: redlimit.FromDenyCache}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Observe(e)
			}
		})
	})
}
