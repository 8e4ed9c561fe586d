package rls

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/redlimit/redlimit/service/internal/config"
)

// MaxDetailedLabelBytes is the longest rule label a detailed_metric rule
// gets. A longer one (a request's values are its client's to choose) is
// cut on a character boundary and ends with "…" and 16 hexadecimal digits
// of a hash (64-bit FNV-1a) of the whole label, so that labels alike in
// their first bytes stay apart.
const MaxDetailedLabelBytes = 256

// detailedMark separates a cut label from the hash that ends it.
const detailedMark = "…"

// detailedLabels hands out the rule labels of detailed_metric rules: each
// label once made counts its descriptors from then on; new ones are made
// while the rule has fewer than perRule and the service fewer than total.
// Past either, the rule's path is the label (the overflow series). It is
// safe for concurrent use; a label made once is found without a lock.
type detailedLabels struct {
	made    sync.Map // label → struct{}
	perRule sync.Map // rule path → *atomic.Int64, the labels of the rule
	n       atomic.Int64
}

// label returns the metrics label of rule for a descriptor with entries
// that matched it through path: its metric name (config.Rule.MetricName:
// the rule's path, or with detailed_metric or value_to_metric a name with
// the request's values, as envoyproxy/ratelimit names its stats), within
// the caps of opts on the labels that name values.
func (s *Service) label(rule *config.Rule, entries []config.Entry, path []*config.Descriptor) string {
	if s.opts.MaxDetailedSeries < 0 {
		return rule.Path
	}
	name := rule.MetricName(entries, path)
	if name == rule.Path {
		return name
	}
	l := detailedLabel(name)
	d := &s.detailed
	if _, ok := d.made.Load(l); ok {
		return l
	}
	if d.n.Load() >= int64(s.opts.MaxDetailedSeries) {
		return rule.Path
	}
	c, ok := d.perRule.Load(rule.Path)
	if !ok {
		c, _ = d.perRule.LoadOrStore(rule.Path, new(atomic.Int64))
	}
	ofRule := c.(*atomic.Int64)
	if ofRule.Add(1) > int64(s.opts.MaxDetailedSeriesPerRule) {
		ofRule.Add(-1)
		return rule.Path
	}
	if d.n.Add(1) > int64(s.opts.MaxDetailedSeries) {
		d.n.Add(-1)
		ofRule.Add(-1)
		return rule.Path
	}
	if _, loaded := d.made.LoadOrStore(l, struct{}{}); loaded { // made meanwhile
		d.n.Add(-1)
		ofRule.Add(-1)
	}
	return l
}

// detailedLabel returns l as valid UTF-8 (a Prometheus label must be; a
// caller of Decide may pass any bytes) of at most MaxDetailedLabelBytes.
func detailedLabel(l string) string {
	if len(l) <= MaxDetailedLabelBytes && utf8.ValidString(l) {
		return l
	}
	sum := fnv64a(l)
	l = strings.ToValidUTF8(l, "\uFFFD")
	if len(l) <= MaxDetailedLabelBytes {
		return l
	}
	cut := MaxDetailedLabelBytes - len(detailedMark) - 16
	for cut > 0 && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return l[:cut] + detailedMark + fmt.Sprintf("%016x", sum)
}

// fnv64a returns the 64-bit FNV-1a hash of s (hash/fnv's, without copying
// s to bytes).
func fnv64a(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}
