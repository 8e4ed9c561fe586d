package rls

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redlimit/redlimit"
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
