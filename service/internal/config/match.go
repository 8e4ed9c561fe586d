package config

import "strings"

// Match returns the rule that applies to a request descriptor of domain, or
// nil when the domain is unknown or no rule matches (no limit). Matching is
// envoyproxy/ratelimit's: at each level, an exact key_value first, then
// wildcard values in file order, then the key alone; the rule applies at
// the depth of the whole request descriptor.
//
// Match does not allocate, and is safe for concurrent use.
func (c *Config) Match(domain string, entries []Entry) *Rule {
	if c == nil {
		return nil
	}
	d := c.Domains[domain]
	if d == nil {
		return nil
	}
	return d.Match(entries)
}

// Match returns the rule of d that applies to a request descriptor, or nil,
// as [Config.Match] does.
//
// Level by level, the entry (key k, value v) selects a child:
//   - the child with key k and value v;
//   - else the first child in file order with key k and a wildcard value
//     that v matches;
//   - else the child with key k and no value.
//
// When none exists, nothing matches. There is no backtracking to a less
// specific child. After the last entry, the node reached gives its rule,
// which may be nil. A request descriptor deeper than the tree matches
// nothing, and so does one with no entries.
func (d *Domain) Match(entries []Entry) *Rule {
	r, _ := d.match(entries, nil, false)
	return r
}

// MatchPath returns the rule of domain that applies to a request
// descriptor, as [Config.Match] does, and path with the descriptor
// selected at each level appended: one per entry when the rule is not
// nil. What a path says beyond the rule, [KeyValue] and [Rule.MetricName]
// read: share_threshold and value_to_metric are properties of the levels
// a request goes through, not of the rule at the end.
//
// MatchPath allocates nothing when path has room for the entries.
func (c *Config) MatchPath(domain string, entries []Entry, path []*Descriptor) (*Rule, []*Descriptor) {
	if c == nil {
		return nil, path
	}
	return c.Domains[domain].match(entries, path, true)
}

// match returns the rule entries match, and, with record, path with the
// descriptors selected appended; without, path as given.
func (d *Domain) match(entries []Entry, path []*Descriptor, record bool) (*Rule, []*Descriptor) {
	if d == nil || len(entries) == 0 {
		return nil, path
	}
	start := len(path)
	children, x := d.Descriptors, d.index
	var n *Descriptor
	for _, e := range entries {
		if n = lookup(children, x, e); n == nil {
			return nil, path[:start]
		}
		if record {
			path = append(path, n)
		}
		children, x = n.Descriptors, n.index
	}
	if n.Rule == nil {
		return nil, path[:start]
	}
	return n.Rule, path
}

// KeyValue returns what stands for the request's value v in the key of a
// limit, at a level where d was selected. When d shares its threshold
// (share_threshold), that is d's wildcard pattern. So every value the
// pattern matches counts against one limit, as in envoyproxy/ratelimit.
// Otherwise it is v.
func (d *Descriptor) KeyValue(v string) string {
	if d.ShareThreshold {
		return d.Value
	}
	return v
}

// MetricName returns the name envoyproxy/ratelimit gives the metrics of a
// request descriptor (entries) that matched r through path. path is as
// MatchPath returns it. The name is r.Path, unless the rule or a level
// asks for the request's values.
//
// A detailed_metric rule is named by the domain and every entry's
// key_value: the request's values. A level that shares its threshold is
// named key_pattern instead. A key without a value is then its key alone.
// Otherwise each level is named as in r.Path: key_value for an exact
// value, key_pattern for a wildcard, key for the key alone. A level with
// value_to_metric names the request's value (key_value) instead. It does
// so where it matched the key alone or a wildcard, unless it shares its
// threshold. Entries and path of different lengths give r.Path.
//
// These are the names envoyproxy/ratelimit's code gives: its GetLimit,
// and its tests of share_threshold. A shared level is named by the whole
// pattern, "route_api/*". Its README's example 11 writes "route_api"
// there, and "method_GET" for a level that names no value.
func (r *Rule) MetricName(entries []Entry, path []*Descriptor) string {
	if len(path) != len(entries) || len(path) == 0 {
		return r.Path
	}
	shares, values := false, r.DetailedMetric
	for _, d := range path {
		shares = shares || d.ShareThreshold
		values = values || d.ValueToMetric
	}
	if !values {
		return r.Path
	}
	var b strings.Builder
	b.WriteString(r.Domain)
	for i, e := range entries {
		d := path[i]
		var v string
		always := false // key_ even for an empty value, as envoy writes it
		switch {
		case d.ShareThreshold:
			v = d.Value
		case r.DetailedMetric:
			v, always = e.Value, !shares
		case d.ValueToMetric && (d.Value == "" || isWildcard(d.Value)):
			v = e.Value
		default:
			v = d.Value
		}
		b.WriteByte('.')
		b.WriteString(e.Key)
		if v != "" || always {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}

// index speeds up the lookup of one level's children.
type index struct {
	// exact holds every child by key and value; the key-alone child has
	// value "". Wildcard children are here too, so that a request value
	// equal to a pattern selects it first, as in envoyproxy/ratelimit.
	exact map[Entry]*Descriptor
	// wild holds the wildcard children of each key, in file order.
	wild map[string][]*Descriptor
}

// lookup returns the child of one level that the entry e selects, or nil.
// Without an index (a small level, or a tree built by hand) it scans
// children, in the same order of preference.
func lookup(children []*Descriptor, x *index, e Entry) *Descriptor {
	if x != nil {
		if e.Value != "" {
			if d := x.exact[e]; d != nil {
				return d
			}
		}
		if x.wild != nil {
			for _, d := range x.wild[e.Key] {
				if matchWildcard(d.Value, e.Value) {
					return d
				}
			}
		}
		return x.exact[Entry{Key: e.Key}]
	}
	if e.Value != "" {
		for _, d := range children {
			if d.Key == e.Key && d.Value == e.Value {
				return d
			}
		}
	}
	for _, d := range children {
		if d.Key == e.Key && isWildcard(d.Value) && matchWildcard(d.Value, e.Value) {
			return d
		}
	}
	for _, d := range children {
		if d.Key == e.Key && d.Value == "" {
			return d
		}
	}
	return nil
}

// minIndexed is the number of children from which a level is indexed:
// below it, comparing the keys of a scan is faster than hashing.
const minIndexed = 16

// buildIndex indexes the whole tree of d.
func (d *Domain) buildIndex() {
	d.index = newIndex(d.Descriptors, minIndexed)
	d.indexed = true
}

// newIndex indexes the children of ds, recursively, and returns an index of
// ds; levels of fewer than min descriptors get none (nil). With duplicate descriptors
// (possible only in a tree built by hand) the first one wins, as in a scan.
func newIndex(ds []*Descriptor, min int) *index {
	for _, d := range ds {
		d.index = newIndex(d.Descriptors, min)
	}
	if len(ds) < min || len(ds) == 0 {
		return nil
	}
	x := &index{exact: make(map[Entry]*Descriptor, len(ds))}
	for _, d := range ds {
		e := Entry{Key: d.Key, Value: d.Value}
		if _, dup := x.exact[e]; !dup {
			x.exact[e] = d
		}
		if isWildcard(d.Value) {
			if x.wild == nil {
				x.wild = make(map[string][]*Descriptor)
			}
			x.wild[d.Key] = append(x.wild[d.Key], d)
		}
	}
	return x
}

// isWildcard reports whether a descriptor value is a wildcard pattern.
func isWildcard(value string) bool { return strings.IndexByte(value, '*') >= 0 }

// matchWildcard reports whether s matches pattern, in which each "*"
// stands for any run of bytes, empty included, and every other byte for
// itself. A pattern with no "*" matches itself only.
func matchWildcard(pattern, s string) bool {
	i := strings.IndexByte(pattern, '*')
	if i < 0 {
		return pattern == s
	}
	// The literal text before the first star is a prefix of s.
	if !strings.HasPrefix(s, pattern[:i]) {
		return false
	}
	s, pattern = s[i:], pattern[i+1:]
	// The literal text after the last star is a suffix of what remains.
	j := strings.LastIndexByte(pattern, '*')
	suffix := pattern[j+1:]
	if !strings.HasSuffix(s, suffix) {
		return false
	}
	s = s[:len(s)-len(suffix)]
	if j < 0 {
		return true
	}
	// The segments between stars occur in order in the rest: taking each at
	// its leftmost occurrence leaves the most room for the following ones.
	for middle := pattern[:j]; ; {
		k := strings.IndexByte(middle, '*')
		seg := middle
		if k >= 0 {
			seg = middle[:k]
		}
		if seg != "" {
			at := strings.Index(s, seg)
			if at < 0 {
				return false
			}
			s = s[at+len(seg):]
		}
		if k < 0 {
			return true
		}
		middle = middle[k+1:]
	}
}
