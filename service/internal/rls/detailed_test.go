package rls

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// detailedLabels returns the distinct rule labels the observer saw, with
// how many descriptors each counted.
func (r *recorder) labels() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for k, n := range r.descs {
		fields := strings.Split(k, " ")
		m[fields[1]] += n
	}
	return m
}

// A detailed_metric label is at most MaxDetailedLabelBytes long whatever the
// values: a long one is cut, on a character boundary, and ends with "…" and
// a hash of the whole label, so that two values alike in their first bytes
// keep apart.
func TestDetailedLabelLength(t *testing.T) {
	t.Parallel()
	r := rule("d.user", "", redlimit.PerMinute(100), "minute")
	r.DetailedMetric = true
	f := newFixture(t, Options{}, domain("d", node("user", "", r)))
	long := strings.Repeat("a", 65_000)
	values := []string{
		"alice",
		long + "1",
		long + "2",
		strings.Repeat("é", 200), // two bytes each: the cut falls inside one
		"\xff\xfe",               // not UTF-8, as a caller of Decide may pass
	}
	for _, v := range values {
		f.do(request("d", desc("user", v)))
	}
	got := f.obs.labels()
	if len(got) != len(values) {
		t.Fatalf("%d labels for %d values: %.200v", len(got), len(values), got)
	}
	if got["d.user_alice"] != 1 {
		t.Errorf("a short value is labelled as it is: %.200v", got)
	}
	for l := range got {
		if len(l) > MaxDetailedLabelBytes || !utf8.ValidString(l) {
			t.Errorf("label of %d bytes (valid UTF-8: %v): %.80q", len(l), utf8.ValidString(l), l)
		}
		if len(l) > 100 && !strings.HasPrefix(l, "d.user_") {
			t.Errorf("a cut label keeps its start: %.80q", l)
		}
	}
}

// Each detailed rule has its own share of the labels: a client sending
// thousands of values to one rule takes MaxDetailedSeriesPerRule labels and
// the rest of its descriptors are counted under the rule's path, while
// another detailed rule still gets labels of its own.
func TestDetailedSlotsPerRule(t *testing.T) {
	t.Parallel()
	a := rule("d.a", "", redlimit.PerMinute(1_000_000), "minute")
	b := rule("d.b", "", redlimit.PerMinute(1_000_000), "minute")
	a.DetailedMetric, b.DetailedMetric = true, true
	f := newFixture(t, Options{}, domain("d", node("a", "", a), node("b", "", b)))
	for i := range 3 * DefaultMaxDetailedSeries {
		f.do(request("d", desc("a", fmt.Sprint(i))))
	}
	for i := range 10 {
		f.do(request("d", desc("b", fmt.Sprint(i))))
	}
	got := f.obs.labels()
	var ofA, ofB int
	for l := range got {
		switch {
		case strings.HasPrefix(l, "d.a_"):
			ofA++
		case strings.HasPrefix(l, "d.b_"):
			ofB++
		}
	}
	if ofA != DefaultMaxDetailedSeriesPerRule {
		t.Errorf("rule a has %d labels, want %d", ofA, DefaultMaxDetailedSeriesPerRule)
	}
	if want := 3*DefaultMaxDetailedSeries - DefaultMaxDetailedSeriesPerRule; got["d.a"] != want {
		t.Errorf("rule a's overflow counted %d descriptors, want %d", got["d.a"], want)
	}
	if ofB != 10 || got["d.b"] != 0 {
		t.Errorf("rule b has %d labels and %d overflow, want 10 and 0", ofB, got["d.b"])
	}
}

// fnv64a is hash/fnv's FNV-1a.
func TestFNV64a(t *testing.T) {
	for _, s := range []string{"", "a", "d.user_" + strings.Repeat("x", 1000)} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv64a(s), h.Sum64(); got != want {
			t.Errorf("fnv64a(%.20q) = %x, want %x", s, got, want)
		}
	}
}

// seriesObserver keeps the rule labels that have a series, as the
// Prometheus metrics do: Descriptor makes one, DropLabel deletes it. It
// records the most it held at once, and the label each value (of a
// descriptor's first entry) was last counted under.
type seriesObserver struct {
	nopObserver
	hold  func(rule string) // if set, called first by Descriptor
	mu    sync.Mutex
	live  map[string]bool   // "domain rule"
	peak  int               // most labels live at once
	drops int               // DropLabel calls
	last  map[string]string // value → rule label
}

func newSeriesObserver() *seriesObserver {
	return &seriesObserver{live: map[string]bool{}, last: map[string]string{}}
}

func (o *seriesObserver) Descriptor(domain, rule string, _ Outcome, _ redlimit.Source, entries []*rlpb.RateLimitDescriptor_Entry) {
	if o.hold != nil {
		o.hold(rule)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.live[domain+" "+rule] = true
	o.peak = max(o.peak, len(o.live))
	o.last[entries[0].GetValue()] = rule
}

func (o *seriesObserver) DropLabel(domain, rule string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.live, domain+" "+rule)
	o.drops++
}

// labelOf returns the label value was last counted under.
func (o *seriesObserver) labelOf(value string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[value]
}

func (o *seriesObserver) isLive(domain, rule string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.live[domain+" "+rule]
}

func (o *seriesObserver) peakLive() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak
}

// detailedFixture returns a fixture of one detailed_metric rule, d.user,
// reporting to a seriesObserver.
func detailedFixture(t *testing.T, opts Options) (*fixture, *seriesObserver) {
	r := rule("d.user", "", redlimit.PerMinute(1_000_000_000), "minute")
	r.DetailedMetric = true
	obs := newSeriesObserver()
	opts.Observer = obs
	return newFixture(t, opts, domain("d", node("user", "", r))), obs
}

// A flood of values that took every slot of a rule first does not keep
// them from the values that are frequent: values sent a tenth as often as
// the flood, which goes on all along, end with labels of their own, and the
// series never exceed the rule's cap and its overflow series. The flood's
// values are sent once each, or a few times in a row.
func TestDetailedHeavyValuesWinSlots(t *testing.T) {
	t.Parallel()
	for _, repeats := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("repeats=%d", repeats), func(t *testing.T) {
			t.Parallel()
			f, obs := detailedFixture(t, Options{})
			per := DefaultMaxDetailedSeriesPerRule
			flood := func(i int) {
				for range repeats {
					f.do(request("d", desc("user", fmt.Sprint("flood", i))))
				}
			}
			for i := range 2 * per {
				flood(i)
			}
			heavy := []string{"h0", "h1", "h2", "h3", "h4"}
			for i := range 5000 / repeats {
				flood(2*per + i)
				if i%10 == 0 {
					for range repeats {
						f.do(request("d", desc("user", heavy[i/10%len(heavy)])))
					}
				}
			}
			for _, h := range heavy {
				if got := obs.labelOf(h); got != "d.user_"+h {
					t.Errorf("heavy value %s last counted under %q", h, got)
				}
			}
			if got := obs.peakLive(); got > per+1 {
				t.Errorf("%d series at once, above %d labels and the overflow", got, per)
			}
			t.Logf("%d labels dropped", obs.drops)
		})
	}
}

// A heavy value that begins after a flood took every slot, while the flood
// goes on at ten times its rate, gets a label within a few of its requests.
func TestDetailedLateHeavyValue(t *testing.T) {
	t.Parallel()
	f, obs := detailedFixture(t, Options{})
	per := DefaultMaxDetailedSeriesPerRule
	next := 0
	flood := func(n int) {
		for range n {
			f.do(request("d", desc("user", fmt.Sprint("flood", next))))
			next++
		}
	}
	flood(3 * per)
	const within = 3
	got := -1
	for i := range 100 {
		flood(10)
		f.do(request("d", desc("user", "late")))
		if obs.labelOf("late") == "d.user_late" {
			got = i + 1
			break
		}
	}
	if got < 0 || got > within {
		t.Fatalf("the late heavy value got its label after %d requests (-1: never), want at most %d", got, within)
	}
	t.Logf("the late heavy value got its label at its request %d", got)
	for range 200 { // and keeps it
		flood(10)
		f.do(request("d", desc("user", "late")))
	}
	if l := obs.labelOf("late"); l != "d.user_late" {
		t.Errorf("the late heavy value lost its label: %q", l)
	}
	if got := obs.peakLive(); got > per+1 {
		t.Errorf("%d series at once, above %d labels and the overflow", got, per)
	}
}

// Under concurrent floods on two rules with small caps, the series never
// exceed the caps at any moment (the observer sees every label made and
// dropped), and the heavy values end with labels.
func TestDetailedConcurrentFlood(t *testing.T) {
	t.Parallel()
	a := rule("d.a", "", redlimit.PerMinute(1_000_000_000), "minute")
	b := rule("d.b", "", redlimit.PerMinute(1_000_000_000), "minute")
	a.DetailedMetric, b.DetailedMetric = true, true
	obs := newSeriesObserver()
	const perRule, total = 8, 12
	f := newFixture(t, Options{Observer: obs, MaxDetailedSeries: total, MaxDetailedSeriesPerRule: perRule},
		domain("d", node("a", "", a), node("b", "", b)))
	heavy := []string{"h0", "h1", "h2"}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				key := []string{"a", "b"}[i%2]
				v := fmt.Sprintf("flood%d-%d", g, i)
				if i%3 == 0 && key == "a" {
					v = heavy[i/3%len(heavy)]
				}
				if _, err := f.svc.ShouldRateLimit(context.Background(), request("d", desc(key, v))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, h := range heavy {
		f.do(request("d", desc("a", h)))
		if got := obs.labelOf(h); got != "d.a_"+h {
			t.Errorf("heavy value %s last counted under %q", h, got)
		}
	}
	if got := obs.peakLive(); got > total+2 {
		t.Errorf("%d series at once, above %d labels and two overflow series", got, total)
	}
}

// A label that stops being sent loses its slot to labels that go on, as
// its count decays.
func TestDetailedStoppedValueLosesSlot(t *testing.T) {
	t.Parallel()
	const per = 4
	f, obs := detailedFixture(t, Options{MaxDetailedSeriesPerRule: per})
	send := func(v string) { f.do(request("d", desc("user", v))) }
	for range 50 {
		for i := range per {
			send(fmt.Sprint("old", i))
		}
	}
	next := 0
	for range 300 {
		for range 10 {
			send(fmt.Sprint("flood", next))
			next++
		}
		for i := range per {
			send(fmt.Sprint("new", i))
		}
	}
	for i := range per {
		if v := fmt.Sprint("new", i); obs.labelOf(v) != "d.user_"+v {
			t.Errorf("%s last counted under %q", v, obs.labelOf(v))
		}
		if obs.isLive("d", fmt.Sprint("d.user_old", i)) {
			t.Errorf("old%d's series was not dropped", i)
		}
	}
}

// A slot lost while a descriptor is being reported through it still
// counts against the caps until that report ends; then its label is
// dropped, once, and the label that won takes the slot.
func TestDetailedSlotLostDuringReport(t *testing.T) {
	t.Parallel()
	f, obs := detailedFixture(t, Options{MaxDetailedSeriesPerRule: 1})
	send := func(v string) { f.do(request("d", desc("user", v))) }
	send("a")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	obs.hold = func(rule string) {
		if rule == "d.user_a" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := f.svc.ShouldRateLimit(context.Background(), request("d", desc("user", "a"))); err != nil {
			t.Error(err)
		}
	}()
	<-entered
	for range 10 { // b outweighs a, which loses its slot, still reported through
		send("b")
	}
	if l := obs.labelOf("b"); l != "d.user" {
		t.Errorf("b took a slot still reported through: counted under %q", l)
	}
	if !obs.isLive("d", "d.user_a") {
		t.Errorf("a's label was dropped during a report through its slot")
	}
	close(release)
	<-done
	if obs.isLive("d", "d.user_a") {
		t.Errorf("a's label was not dropped after the report through its slot ended")
	}
	send("b")
	if l := obs.labelOf("b"); l != "d.user_b" {
		t.Errorf("b counted under %q once the slot was free", l)
	}
	if got := obs.peakLive(); got > 2 {
		t.Errorf("%d series at once, above one label and the overflow", got)
	}
}

// nameSink keeps TestDetailedHeldLabelAllocs's names on the heap.
var nameSink string

// A label that holds its slot costs nothing more than its name: no
// allocation to find and count it, none to report it. Not parallel:
// allocations are counted process-wide.
func TestDetailedHeldLabelAllocs(t *testing.T) {
	r := rule("d.user", "", redlimit.PerMinute(10), "minute")
	r.DetailedMetric = true
	f := newFixture(t, Options{}, domain("d", node("user", "", r)))
	path := []*config.Descriptor{node("user", "", r)}
	entries := []config.Entry{{Key: "user", Value: "alice"}}
	l, sl := f.svc.label(r, entries, path)
	if sl == nil {
		t.Fatalf("no slot for %q", l)
	}
	name := testing.AllocsPerRun(100, func() { nameSink = r.MetricName(entries, path) })
	held := testing.AllocsPerRun(100, func() { nameSink, sl = f.svc.label(r, entries, path) })
	if held != name {
		t.Errorf("a held label: %v allocations, its name alone %v", held, name)
	}
	if got := testing.AllocsPerRun(100, func() {
		sl.observe(nopObserver{}, "d", Allowed, redlimit.FromStore, nil)
	}); got != 0 {
		t.Errorf("reporting through a slot: %v allocations", got)
	}
}

// A configuration reload that removes a detailed_metric rule gives back
// the labels it held: its series are dropped, and the slots count no more
// against MaxDetailedSeries, so that the rules of the new configuration
// get labels. (They kept the labels for ever: after a reload that removed
// or renamed the detailed rules that held them all, no detailed rule
// could ever get one, and /metrics kept the series of rules gone.)
func TestDetailedReloadGivesBackLabels(t *testing.T) {
	t.Parallel()
	old := rule("d.old", "", redlimit.PerMinute(1_000_000), "minute")
	old.DetailedMetric = true
	obs := newSeriesObserver()
	f := newFixture(t, Options{Observer: obs, MaxDetailedSeries: 4, MaxDetailedSeriesPerRule: 4}, domain("d", node("old", "", old)))
	for i := range 4 {
		for range 3 {
			f.do(request("d", desc("old", fmt.Sprint(i))))
		}
	}
	if !obs.isLive("d", "d.old_3") {
		t.Fatalf("before the reload, d.old_3 has no series: %v", obs.live)
	}
	cur := rule("d.new", "", redlimit.PerMinute(1_000_000), "minute")
	cur.DetailedMetric = true
	f.svc.SetConfig(mustConfig(t, domain("d", node("new", "", cur))))
	for range 20 {
		f.do(request("d", desc("new", "x")))
	}
	if got := obs.labelOf("x"); got != "d.new_x" {
		t.Errorf("after the reload, value x of the new detailed rule is counted under %q, want d.new_x", got)
	}
	for i := range 4 {
		if l := "d.old_" + fmt.Sprint(i); obs.isLive("d", l) {
			t.Errorf("after the reload, the series of %s, a rule gone, is still live", l)
		}
	}
}
