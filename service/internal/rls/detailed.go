package rls

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/spacesaving"
)

// MaxDetailedLabelBytes is the longest rule label a detailed_metric rule
// gets. A request's values are its client's to choose. A longer label is
// cut on a character boundary. It ends with "…" and 16 hexadecimal digits
// of a hash (64-bit FNV-1a) of the whole label. So labels alike in their
// first bytes stay apart.
const MaxDetailedLabelBytes = 256

// detailedMark separates a cut label from the hash that ends it.
const detailedMark = "…"

// LabelDropper is implemented by an [Observer] that keeps something for
// each rule label it is given, as the Prometheus metrics keep a series.
// DropLabel tells it that a detailed_metric label lost its slot (see
// "Metrics" in the package documentation). What it keeps of the label can
// then go. From then on the label's descriptors are reported under the
// rule's path, until it wins a slot back. DropLabel is called once per
// slot lost. It comes after the last Descriptor call that reported the
// label through that slot has returned.
type LabelDropper interface {
	DropLabel(domain, rule string)
}

// Tuning of the detailed_metric slots: see detailedLabels.
const (
	// detailedRepeats is the least count a label not holding a slot needs
	// to take one from another label. So a value seen once (a flood of
	// unique values) never takes a slot that is held.
	detailedRepeats = 2
	// detailedMargin is how much more than the weakest held label a label
	// must count to take its slot. So labels of about equal weight do not
	// trade slots at every request.
	detailedMargin = 1.5
	// detailedCandidates is how many labels without a slot a rule counts,
	// per slot it may hold, and detailedMinCandidates the least.
	detailedCandidates    = 2
	detailedMinCandidates = 64
	// detailedDecay is how many descriptors without a slot, per slot the
	// rule may hold, a rule counts between two halvings of every count.
	detailedDecay = 8
)

// detailedLabels hands out the rule labels of detailed_metric rules, by
// the rule "Metrics" in the package documentation states. Each rule keeps
// a decayed count of the hits of each label it holds. It counts the labels
// that miss in a Space-Saving table (package spacesaving). The table has
// detailedCandidates×perRule entries, at least detailedMinCandidates. It
// is keyed by a 64-bit hash of the label, so an entry's size does not
// depend on the label. What competes is what the table guarantees a label
// counted (count - error). So a value seen once never takes a held slot.
//
// A label holding a slot is found and counted without a lock (a map load,
// then three atomic additions with the observation); a missing label takes
// its rule's lock. Series are bounded at every moment: a slot lost while a
// request is reporting through it counts against the caps until that
// report ends and the label is dropped.
type detailedLabels struct {
	held  sync.Map     // label → *detailedSlot, the labels holding a slot
	rules sync.Map     // rule path → *detailedRule
	n     atomic.Int64 // slots of every rule, until dropped
	// labelled holds the paths of the rules that the configuration last
	// set names by the request's values (see prune); nil until then.
	labelled atomic.Pointer[map[string]bool]
}

// detailedRule is the slots and counts of one detailed_metric rule.
type detailedRule struct {
	set          *detailedLabels
	domain, path string
	live         atomic.Int64 // slots until dropped: taken under mu, given back by drop

	mu     sync.Mutex
	slots  []*detailedSlot            // the labels holding a slot
	cands  *spacesaving.Table[uint64] // the hashes of the labels that missed
	misses int                        // since the last decay
	gone   bool                       // pruned: the configuration names it by values no more
}

// detailedSlot is one label's slot. Its label is reported through it
// (observe) until it is lost.
type detailedSlot struct {
	label string
	rule  *detailedRule
	hits  atomic.Int64 // descriptors of the label since the last decay
	// state is twice the observations in progress, plus one once the slot
	// is lost. The slot is dropped when it falls to 1.
	state   atomic.Int64
	dropped atomic.Bool
	score   float64 // decayed hits before the last decay; under rule.mu
}

// label returns the metrics label of rule for a descriptor with entries
// that matched it through path. The label is its metric name
// (config.Rule.MetricName), within the caps of opts on the labels that
// name values. The name is the rule's path. With detailed_metric or
// value_to_metric, it is a name with the request's values, as
// envoyproxy/ratelimit names its stats. label also returns the label's
// slot, to report it through (detailedSlot.observe). The slot is nil for
// a label without one.
func (s *Service) label(rule *config.Rule, entries []config.Entry, path []*config.Descriptor) (string, *detailedSlot) {
	if s.opts.MaxDetailedSeries < 0 {
		return rule.Path, nil
	}
	name := rule.MetricName(entries, path)
	if name == rule.Path {
		return name, nil
	}
	l := detailedLabel(name)
	if v, ok := s.detailed.held.Load(l); ok {
		sl := v.(*detailedSlot)
		sl.hits.Add(1)
		return l, sl
	}
	return s.detailed.miss(s.opts, rule, l)
}

// miss counts label l of rule, which held no slot when looked up, and
// gives it a slot if it wins one.
func (d *detailedLabels) miss(opts Options, rule *config.Rule, l string) (string, *detailedSlot) {
	perRule, total := opts.MaxDetailedSeriesPerRule, opts.MaxDetailedSeries
	v, ok := d.rules.Load(rule.Path)
	if !ok {
		v, _ = d.rules.LoadOrStore(rule.Path, &detailedRule{
			set: d, domain: rule.Domain, path: rule.Path,
			cands: spacesaving.New[uint64](max(detailedCandidates*min(perRule, total), detailedMinCandidates)),
		})
	}
	r := v.(*detailedRule)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := d.labelled.Load(); r.gone || m != nil && !(*m)[rule.Path] {
		return rule.Path, nil // a request of a configuration replaced since
	}
	if v, ok := d.held.Load(l); ok { // won meanwhile
		sl := v.(*detailedSlot)
		sl.hits.Add(1)
		return l, sl
	}
	if r.misses++; r.misses >= detailedDecay*perRule {
		r.decay()
	}
	h := fnv64a(l)
	got := r.cands.Add(h)
	if !d.take(r, perRule, total) {
		if got < detailedRepeats {
			return rule.Path, nil
		}
		weak := r.weakest()
		if weak < 0 || got <= detailedMargin*r.slots[weak].current() {
			return rule.Path, nil
		}
		lost := r.lose(weak, opts.Observer)
		defer r.cands.Put(fnv64a(lost.label), lost.current()) // once l has left the table
		if !d.take(r, perRule, total) {
			// The lost slot is still being reported through; the label
			// stays counted and wins a slot at a later miss.
			return rule.Path, nil
		}
	}
	r.cands.Remove(h)
	sl := &detailedSlot{label: l, rule: r, score: got}
	r.slots = append(r.slots, sl)
	d.held.Store(l, sl)
	return l, sl
}

// take reserves a slot for r if it and the service have room.
func (d *detailedLabels) take(r *detailedRule, perRule, total int) bool {
	if r.live.Load() >= int64(perRule) {
		return false
	}
	if d.n.Add(1) > int64(total) {
		d.n.Add(-1)
		return false
	}
	r.live.Add(1)
	return true
}

// weakest returns the index in r.slots of the label with the least count,
// -1 if none. r.mu is held.
func (r *detailedRule) weakest() int {
	weak, least := -1, 0.0
	for i, sl := range r.slots {
		if c := sl.current(); weak < 0 || c < least {
			weak, least = i, c
		}
	}
	return weak
}

// lose takes r.slots[i] from its label and returns it; the slot is
// dropped at once unless an observation is reporting through it, then when
// the last one ends. r.mu is held.
func (r *detailedRule) lose(i int, o Observer) *detailedSlot {
	sl := r.slots[i]
	last := len(r.slots) - 1
	r.slots[i], r.slots[last] = r.slots[last], nil
	r.slots = r.slots[:last]
	r.set.held.Delete(sl.label)
	if sl.state.Add(1) == 1 {
		sl.drop(o)
	}
	return sl
}

// decay halves every count of r. r.mu is held.
func (r *detailedRule) decay() {
	r.misses = 0
	for _, sl := range r.slots {
		sl.score = (sl.score + float64(sl.hits.Swap(0))) / 2
	}
	r.cands.Halve()
}

// current returns the slot's decayed count.
func (sl *detailedSlot) current() float64 { return sl.score + float64(sl.hits.Load()) }

// observe reports a descriptor to o under the slot's label, or under its
// rule's path if the slot was lost since Service.label handed it out.
func (sl *detailedSlot) observe(o Observer, domain string, out Outcome, src redlimit.Source, entries []*rlpb.RateLimitDescriptor_Entry) {
	l := sl.label
	if sl.state.Add(2)&1 != 0 {
		l = sl.rule.path
	}
	o.Descriptor(domain, l, out, src, entries)
	if sl.state.Add(-2) == 1 {
		sl.drop(o)
	}
}

// drop tells o that the lost slot's label is gone, then gives the slot
// back to the caps: the label's series is deleted before another label
// may take its place. (Should the label have won another slot while this
// one was still reported through, its series starts again from zero.)
func (sl *detailedSlot) drop(o Observer) {
	if !sl.dropped.CompareAndSwap(false, true) {
		return
	}
	if d, ok := o.(LabelDropper); ok {
		d.DropLabel(sl.rule.domain, sl.label)
	}
	sl.rule.live.Add(-1)
	sl.rule.set.n.Add(-1)
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

// prune gives back the slots of the rules that c does not name by the
// request's values: a rule removed, renamed, or no longer detailed. Their
// labels are dropped from o. So they count no more against the caps, and
// their series leave the metrics. The rules c keeps keep their labels.
// Requests still in flight with the configuration before c take no new
// slot for the rules pruned. miss checks labelled, set first, under the
// rule's lock, which prune takes.
func (d *detailedLabels) prune(c *config.Config, o Observer) {
	keep := labelledPaths(c)
	d.labelled.Store(&keep)
	d.rules.Range(func(k, v any) bool {
		if keep[k.(string)] {
			return true
		}
		r := v.(*detailedRule)
		r.mu.Lock()
		r.gone = true
		for len(r.slots) > 0 {
			r.lose(len(r.slots)-1, o)
		}
		r.mu.Unlock()
		d.rules.CompareAndDelete(k, v)
		return true
	})
}

// labelledPaths returns the paths of the rules of c whose metrics may be
// named by the request's values: detailed_metric, or value_to_metric on a
// level of the way to them ([config.Rule.MetricName]).
func labelledPaths(c *config.Config) map[string]bool {
	m := map[string]bool{}
	var walk func(ds []*config.Descriptor, values bool)
	walk = func(ds []*config.Descriptor, values bool) {
		for _, d := range ds {
			v := values || d.ValueToMetric
			if d.Rule != nil && (d.Rule.DetailedMetric || v) {
				m[d.Rule.Path] = true
			}
			walk(d.Descriptors, v)
		}
	}
	for _, dom := range c.Domains {
		walk(dom.Descriptors, false)
	}
	return m
}
