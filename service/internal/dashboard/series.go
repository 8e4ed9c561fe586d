package dashboard

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// outcome is a descriptor's outcome, as the page counts it.
type outcome uint8

const (
	outAllowed outcome = iota
	outDenied
	outShadowDenied // a shadow-mode rule would have denied; answered OK
	numOutcomes
)

// series counts the outcomes of one (domain, rule).
type series struct {
	domain, rule string
	shards       []seriesShard
}

// seriesShard is one shard of a series' counters. Each event goes to a
// random shard, so that goroutines deciding the same rule on different CPUs
// rarely touch the same cache lines.
type seriesShard struct {
	perSecond [numOutcomes]ring
	total     [numOutcomes]atomic.Uint64
}

func newSeries(domain, rule string, shards int) *series {
	return &series{domain: domain, rule: rule, shards: make([]seriesShard, shards)}
}

// seriesKey identifies a series.
type seriesKey struct{ domain, rule string }

// seriesTable finds the series of a (domain, rule). Lookups read an
// immutable map through an atomic pointer, without a lock; adding a series
// copies the map under a mutex, which happens once per series. Past max
// series, events of new pairs go to the other series.
type seriesTable struct {
	m      atomic.Pointer[map[seriesKey]*series]
	mu     sync.Mutex // serializes adding series
	max    int
	shards int
	other  *series
}

// otherName is the domain and rule of the series that takes the events of
// the (domain, rule) pairs past RecorderOptions.MaxSeries.
const otherName = "(other)"

func newSeriesTable(max, shards int) *seriesTable {
	t := &seriesTable{max: max, shards: shards, other: newSeries(otherName, otherName, shards)}
	m := map[seriesKey]*series{}
	t.m.Store(&m)
	return t
}

// get returns the series of (domain, rule), adding it if there is room.
func (t *seriesTable) get(domain, rule string) *series {
	domain, rule = clip(domain), clip(rule)
	k := seriesKey{domain, rule}
	m := *t.m.Load()
	if s, ok := m[k]; ok {
		return s
	}
	if len(m) >= t.max {
		return t.other
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m = *t.m.Load()
	if s, ok := m[k]; ok {
		return s
	}
	if len(m) >= t.max {
		return t.other
	}
	s := newSeries(strings.Clone(domain), strings.Clone(rule), t.shards)
	next := maps.Clone(m)
	next[seriesKey{s.domain, s.rule}] = s
	t.m.Store(&next)
	return s
}

// all returns every series, the other series last if it has counted
// anything.
func (t *seriesTable) all() []*series {
	m := *t.m.Load()
	out := make([]*series, 0, len(m)+1)
	for _, s := range m {
		out = append(out, s)
	}
	for i := range t.other.shards {
		sh := &t.other.shards[i]
		if sh.total[outAllowed].Load()+sh.total[outDenied].Load()+sh.total[outShadowDenied].Load() > 0 {
			return append(out, t.other)
		}
	}
	return out
}

// maxLabelLen is the most bytes of a domain, rule or key the dashboard
// keeps; longer ones are cut (at a character boundary), so that one huge
// descriptor value cannot hold much memory.
const maxLabelLen = 256

func clip(s string) string {
	if len(s) <= maxLabelLen {
		return s
	}
	n := maxLabelLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
