package config

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/redlimit/redlimit"
)

// The keys each mapping of a rule file may hold.
var (
	topKeys        = []string{"domain", "descriptors", "algorithm", "failure_policy", "counting"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric",
		"value_to_metric", "share_threshold", "quota_mode", "metadata"}
	rateLimitKeys = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "failure_policy", "unit_multiplier", "counting", "time_zone"}
	replacesKeys = []string{"name"}
)

const (
	// maxErrors is the number of errors reported for one file; past it,
	// parsing stops.
	maxErrors = 20
	// aliasAllowance is how many more nodes than the document holds
	// aliases and merge keys may make parsing visit. A descriptor, or a
	// key of a mapping, is one node. It bounds "billion laughs" files and
	// chains of merges. Without aliases, parsing visits each node at most
	// once.
	aliasAllowance = 50_000
	// maxMergeDepth bounds how deep merge keys may nest: a mapping that
	// merges one that merges another... which would otherwise make the
	// parser recurse as deep as a file is long.
	maxMergeDepth = 64
)

// Parse parses one file's contents; name is used in errors. Errors wrap
// [ErrInvalid]; a file with several problems reports each of them, joined
// with [errors.Join]. The domain returned is indexed for [Domain.Match].
func Parse(name string, data []byte) (*Domain, error) {
	d, err := parse(name, data, false, 0)
	if err != nil {
		return nil, err
	}
	d.buildIndex()
	return d, nil
}

// parse parses one file's contents, as Parse does, but without indexing
// it. With deferReplaces, the names its rules replace are not checked
// against the file's rule names but kept in the domain's refs, to be
// checked once the files of a domain are merged. alg counts the limits
// that name no algorithm (0: redlimit.SlidingWindow).
func parse(name string, data []byte, deferReplaces bool, alg redlimit.Algorithm) (*Domain, error) {
	p := &parser{file: name, names: map[string]bool{}, active: map[*yaml.Node]bool{}, deferReplaces: deferReplaces, defaultAlgorithm: cmp.Or(alg, redlimit.SlidingWindow)}
	d := p.document(data)
	if len(p.errs) > 0 {
		// In line order; the note that parsing stopped stays last.
		n := min(len(p.errs), maxErrors)
		slices.SortStableFunc(p.errs[:n], func(a, b error) int { return a.(*Error).Line - b.(*Error).Line })
		return nil, joinErrors(p.errs)
	}
	d.Files = []string{name}
	return d, nil
}

// parser holds the state of parsing one file.
type parser struct {
	file string
	errs []error

	domain           string
	algorithm        redlimit.Algorithm     // the file's default
	defaultAlgorithm redlimit.Algorithm     // the file's default when it names none
	failure          redlimit.FailurePolicy // the file's default
	counting         Counting               // the file's default
	nodesLeft        int                    // nodes left to visit before aliases count as a bomb
	nodes            int                    // nodes in the document, not following aliases

	names         map[string]bool     // rule names defined in the file
	replaces      []field             // replaces[i].name fields, checked against names at the end
	deferReplaces bool                // keep replaces in the domain's refs instead
	active        map[*yaml.Node]bool // descriptor nodes being parsed, to catch alias cycles
}

// errorf records an error at a line and field, with an optional cause.
func (p *parser) errorf(line int, path string, cause error, format string, args ...any) {
	switch {
	case p.nodesLeft < 0:
	case len(p.errs) < maxErrors:
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...), Err: cause})
	case len(p.errs) == maxErrors:
		p.errs = append(p.errs, &Error{File: p.file, Msg: fmt.Sprintf("more than %d errors; stopped", maxErrors)})
	}
}

// stopped reports whether parsing should stop: too many errors, or the
// nodes left spent.
func (p *parser) stopped() bool { return len(p.errs) > maxErrors || p.nodesLeft < 0 }

// spend takes n nodes from those left, and reports whether it had them. The
// first call that finds it spent records an error at line, naming what.
func (p *parser) spend(n int, line int, path, what string) bool {
	if p.nodesLeft < n {
		if p.nodesLeft >= 0 {
			p.errorf(line, path, nil, "%s expand to too many nodes (more than %d beyond the %d the file holds)",
				what, aliasAllowance, p.nodes)
		}
		p.nodesLeft = -1 // and errorf records nothing more: the rest would follow from it
		return false
	}
	p.nodesLeft -= n
	return true
}

// document parses the file's one YAML document.
func (p *parser) document(data []byte) *Domain {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decode(dec, &doc); err != nil {
		if err == io.EOF {
			p.errorf(0, "", nil, "the file is empty (want domain and descriptors)")
		} else {
			p.yamlError(err)
		}
		return nil
	}
	// Later documents must be empty: a trailing "---" is harmless.
	for {
		var next yaml.Node
		err := decode(dec, &next)
		if err == io.EOF {
			break
		}
		if err != nil {
			p.yamlError(err)
			break
		}
		if len(next.Content) > 0 && !isNull(next.Content[0]) {
			p.errorf(next.Content[0].Line, "", nil, "a second YAML document: a file holds one domain")
			break
		}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		p.errorf(doc.Line, "", nil, "the file is empty (want domain and descriptors)")
		return nil
	}
	root := doc.Content[0]
	p.nodes = countNodes(root)
	p.nodesLeft = p.nodes + aliasAllowance
	return p.top(root)
}

// decode decodes the next document of dec, turning a panic of the YAML
// package into an error: no input may crash a reload.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("yaml: internal error: %v", v)
		}
	}()
	return dec.Decode(n)
}

// yamlError records an error of the YAML parser ("yaml: line 3: did not
// find expected key") with its line.
func (p *parser) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, text
			}
		}
	}
	p.errorf(line, "", nil, "invalid YAML: %s", msg)
}

// top parses the top-level mapping.
func (p *parser) top(root *yaml.Node) *Domain {
	fields, ok := p.mapping(root, "", topKeys)
	if !ok {
		return nil
	}
	d := &Domain{File: p.file}
	if f, ok := fields["domain"]; !ok {
		p.errorf(deref(root).Line, "domain", nil, "missing")
	} else if name, ok := p.str(f); ok && name == "" {
		p.errorf(f.line(), f.path, nil, "empty")
	} else {
		d.Name = name
	}
	p.domain = d.Name

	p.algorithm = p.defaultAlgorithm
	if f, ok := fields["algorithm"]; ok && !isNull(f.val) {
		if a, ok := p.parseAlgorithm(f); ok {
			p.algorithm = a
		}
	}
	if f, ok := fields["failure_policy"]; ok && !isNull(f.val) {
		if fp, ok := p.parseFailure(f); ok {
			p.failure = fp
		}
	}
	if f, ok := fields["counting"]; ok && !isNull(f.val) {
		if c, ok := p.parseCounting(f); ok {
			p.counting = c
		}
	}
	if f, ok := fields["descriptors"]; ok {
		d.Descriptors = p.descriptors(f, d.Name)
	}
	for _, f := range p.replaces {
		name, _ := p.str(f)
		switch {
		case p.deferReplaces:
			d.refs = append(d.refs, replaceRef{name: name, file: p.file, line: f.line(), field: f.path})
		case !p.names[name]:
			p.errorf(f.line(), f.path, nil, "no rule of domain %q is named %q", p.domain, name)
		}
	}
	return d
}

// descriptors parses a list of descriptors whose parent has the rule path
// parent.
func (p *parser) descriptors(f field, parent string) []*Descriptor {
	items, ok := p.sequence(f)
	if !ok {
		return nil
	}
	var ds []*Descriptor
	byPath := make(map[string]*Descriptor, len(items))
	for i, item := range items {
		if p.stopped() {
			return ds
		}
		path := fmt.Sprintf("%s[%d]", f.path, i)
		if n := deref(item); p.active[n] {
			line := item.Line
			if f.val.Kind == yaml.AliasNode {
				line = f.val.Line // the alias that closes the loop
			}
			p.errorf(line, path, nil, "an alias makes this descriptor contain itself")
			continue
		}
		d := p.descriptor(item, path, parent)
		if d == nil {
			continue
		}
		// envoyproxy/ratelimit names a descriptor key_value (or key) and
		// rejects two of the same name at one level, which includes two
		// different pairs spelling one name ("a_b" and "a" "b").
		name := d.Key
		if d.Value != "" {
			name += "_" + d.Value
		}
		if first, dup := byPath[name]; dup {
			if first.Key == d.Key && first.Value == d.Value {
				p.errorf(d.Line, path, nil, "duplicate descriptor %s (first at line %d)", describe(d), first.Line)
			} else {
				p.errorf(d.Line, path, nil, "descriptor %s has the path %q of descriptor %s at line %d",
					describe(d), parent+"."+name, describe(first), first.Line)
			}
			continue
		}
		byPath[name] = d
		ds = append(ds, d)
	}
	return ds
}

// describe names a descriptor in errors: key "k" or key "k" value "v".
func describe(d *Descriptor) string {
	if d.Value == "" {
		return fmt.Sprintf("key %q", d.Key)
	}
	return fmt.Sprintf("key %q value %q", d.Key, d.Value)
}

// descriptor parses one descriptor and its children.
func (p *parser) descriptor(item *yaml.Node, path, parent string) *Descriptor {
	n := deref(item)
	if !p.spend(1, item.Line, path, "aliases") {
		return nil
	}
	p.active[n] = true
	defer delete(p.active, n)

	fields, ok := p.mapping(n, path, descriptorKeys)
	if !ok {
		return nil
	}
	d := &Descriptor{File: p.file, Line: n.Line}
	good := true
	if f, ok := fields["key"]; !ok {
		p.errorf(n.Line, joinPath(path, "key"), nil, "missing")
		good = false
	} else if key, ok := p.str(f); !ok {
		good = false
	} else if key == "" {
		p.errorf(f.line(), f.path, nil, "empty")
		good = false
	} else {
		d.Key = key
	}
	if f, ok := fields["value"]; ok {
		d.Value, _ = p.str(f)
	}
	rulePath := parent + "." + d.Key
	if d.Value != "" {
		rulePath += "_" + d.Value
	}
	if f, ok := fields["value_to_metric"]; ok {
		d.ValueToMetric, _ = p.boolean(f)
	}
	if f, ok := fields["share_threshold"]; ok {
		on, _ := p.boolean(f)
		if on && !isWildcard(d.Value) {
			// envoyproxy/ratelimit refuses it too.
			p.errorf(f.line(), f.path, nil, "applies to a wildcard value (one holding \"*\"), and this descriptor's value %q has none", d.Value)
		}
		d.ShareThreshold = on
	}
	var shadow, detailed, quota bool
	if f, ok := fields["shadow_mode"]; ok {
		shadow, _ = p.boolean(f)
	}
	if f, ok := fields["detailed_metric"]; ok {
		detailed, _ = p.boolean(f)
	}
	if f, ok := fields["quota_mode"]; ok {
		quota, _ = p.boolean(f)
	}
	var metadata *structpb.Struct
	if f, ok := fields["metadata"]; ok {
		metadata = p.metadata(f)
	}
	if f, ok := fields["rate_limit"]; ok && !isNull(f.val) {
		if r := p.rateLimit(f); r != nil {
			r.Path, r.Domain, r.File, r.Line = rulePath, p.domain, p.file, d.Line
			r.Shadow, r.DetailedMetric, r.QuotaMode, r.Metadata = shadow, detailed, quota, metadata
			d.Rule = r
		}
	}
	if f, ok := fields["descriptors"]; ok {
		d.Descriptors = p.descriptors(f, rulePath)
	}
	if !good {
		return nil
	}
	return d
}

// rateLimit parses a rate_limit block.
func (p *parser) rateLimit(rf field) *Rule {
	fields, ok := p.mapping(rf.val, rf.path, rateLimitKeys)
	if !ok {
		return nil
	}
	r := &Rule{}
	good := true
	check := func(ok bool) {
		if !ok {
			good = false
		}
	}
	if f, ok := fields["name"]; ok {
		var ok bool
		r.Name, ok = p.str(f)
		check(ok)
		if r.Name != "" {
			p.names[r.Name] = true
		}
	}
	if f, ok := fields["replaces"]; ok {
		r.Replaces = p.parseReplaces(f, r.Name)
	}
	unlimited := false
	if f, ok := fields["unlimited"]; ok {
		var ok bool
		unlimited, ok = p.boolean(f)
		check(ok)
	}
	if unlimited {
		// envoyproxy/ratelimit rejects a unit with unlimited and ignores
		// requests_per_unit; redlimit's own keys make no sense either.
		for _, k := range []string{"unit", "unit_multiplier", "algorithm", "burst", "failure_policy", "counting", "time_zone"} {
			if f, ok := fields[k]; ok && !isNull(f.val) {
				p.errorf(f.line(), f.path, nil, "an unlimited rule takes no %s", k)
				good = false
			}
		}
		if f, ok := fields["requests_per_unit"]; ok && !isNull(f.val) {
			_, ok := p.integer(f)
			check(ok)
		}
		r.Unlimited = true
		if !good {
			return nil
		}
		return r
	}

	mapLine := rf.key.Line
	var l redlimit.Limit
	if f, ok := fields["unit"]; !ok || isNull(f.val) {
		p.errorf(mapLine, joinPath(rf.path, "unit"), nil, "missing (want %s, or unlimited: true)", unitNames)
		good = false
	} else if s, ok := p.str(f); !ok {
		good = false
	} else if period, known := Units[strings.ToLower(s)]; !known {
		p.errorf(f.line(), f.path, nil, "unknown unit %q (want %s)", s, unitNames)
		good = false
	} else {
		r.Unit, r.UnitMultiplier, l.Period = strings.ToLower(s), 1, period
		if f, ok := fields["unit_multiplier"]; ok && !isNull(f.val) {
			most := int64(redlimit.MaxPeriod / period)
			if n, ok := p.integer(f); !ok {
				good = false
			} else if n < 1 || n > most {
				p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "%d is not in 1..%d (%d %ss make %s, the longest period)",
					n, most, most, r.Unit, redlimit.MaxPeriod)
				good = false
			} else {
				r.UnitMultiplier, l.Period = uint32(n), time.Duration(n)*period
			}
		}
	}
	if f, ok := fields["requests_per_unit"]; !ok || isNull(f.val) {
		p.errorf(mapLine, joinPath(rf.path, "requests_per_unit"), redlimit.ErrInvalidLimit,
			"missing (envoyproxy/ratelimit reads it as 0, which denies everything; write 0 for that, or 1 to %d)", uint32(math.MaxUint32))
		good = false
	} else if n, ok := p.integer(f); !ok {
		good = false
	} else if n < 0 {
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "%d is negative (want 0 to %d)", n, uint32(math.MaxUint32))
		good = false
	} else if n == 0 {
		// envoyproxy/ratelimit's block: every request is over the limit.
		r.DenyAll = true
	} else if n > math.MaxUint32 {
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "%d is above %d, envoy's largest", n, uint32(math.MaxUint32))
		good = false
	} else {
		l.Count = n
	}
	l.Algorithm = p.algorithm
	calendar := false
	if f, ok := fields["time_zone"]; ok && !isNull(f.val) {
		calendar = true
		cal, ok := p.parseCalendar(f, r)
		check(ok)
		// A calendar period is a fixed window's: the rule's default.
		l.Algorithm, l.Period, l.Calendar = redlimit.FixedWindow, cal.Unit.Longest(), cal
	}
	if f, ok := fields["algorithm"]; ok && !isNull(f.val) {
		a, ok := p.parseAlgorithm(f)
		check(ok)
		if ok && calendar && a != redlimit.FixedWindow {
			p.errorf(f.line(), f.path, redlimit.ErrCalendarAlgorithm, "%s cannot count calendar periods (time_zone): use fixed_window", a)
			good = false
		}
		l.Algorithm = a
	}
	l.Failure = p.failure
	if f, ok := fields["failure_policy"]; ok && !isNull(f.val) {
		fp, ok := p.parseFailure(f)
		check(ok)
		l.Failure = fp
	}
	r.Counting = p.counting
	if f, ok := fields["counting"]; ok && !isNull(f.val) {
		c, ok := p.parseCounting(f)
		check(ok)
		r.Counting = c
	}
	if f, ok := fields["burst"]; ok && !isNull(f.val) {
		if l.Algorithm != redlimit.TokenBucket {
			if l.Algorithm.Valid() {
				p.errorf(f.line(), f.path, redlimit.ErrInvalidBurst, "applies to token_bucket only, and the algorithm is %s", l.Algorithm)
			}
			good = false
		} else if b, ok := p.integer(f); !ok {
			good = false
		} else if b < 1 || b > redlimit.MaxCount {
			p.errorf(f.line(), f.path, redlimit.ErrInvalidBurst, "%d is not in 1..%d", b, int64(redlimit.MaxCount))
			good = false
		} else {
			l.Burst = b
		}
	} else if l.Algorithm == redlimit.TokenBucket {
		l.Burst = l.Count
	}
	if !good {
		return nil
	}
	if l.Algorithm == redlimit.SlidingLog && l.Count > redlimit.MaxLogCount {
		f := fields["requests_per_unit"]
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit,
			"%d is above %d, the most a sliding_log keeps (use sliding_window)", l.Count, redlimit.MaxLogCount)
		return nil
	}
	valid := l
	if r.DenyAll {
		// Nothing is counted, but the rest must be valid all the same.
		valid.Count = 1
		if l.Algorithm == redlimit.TokenBucket {
			valid.Burst = 1
		}
	}
	if err := valid.Validate(); err != nil {
		p.errorf(mapLine, rf.path, err, "%s", strings.TrimPrefix(err.Error(), "redlimit: "))
		return nil
	}
	r.Limit = l
	return r
}

// parseCalendar parses time_zone f of rule r, whose unit must be day,
// week, month or year, once.
func (p *parser) parseCalendar(f field, r *Rule) (redlimit.Calendar, bool) {
	zone, ok := p.str(f)
	if !ok {
		return redlimit.Calendar{}, false
	}
	unit, err := redlimit.ParseCalendarUnit(r.Unit)
	switch {
	case zone == "":
		// Often a template's unset variable: UTC must be named.
		p.errorf(f.line(), f.path, redlimit.ErrUnknownZone, "is empty (name the zone, such as UTC or Europe/Berlin)")
		return redlimit.Calendar{}, false
	case r.Unit == "":
		return redlimit.Calendar{}, false // the unit's error is reported
	case err != nil:
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "a calendar period (time_zone) needs unit day, week, month or year, not %s", r.Unit)
		return redlimit.Calendar{}, false
	case r.UnitMultiplier != 1:
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "a calendar period (time_zone) takes no unit_multiplier")
		return redlimit.Calendar{}, false
	}
	cal := redlimit.Calendar{Unit: unit, Zone: zone}
	if err := cal.Validate(); err != nil {
		p.errorf(f.line(), f.path, err, "%s", strings.TrimPrefix(err.Error(), "redlimit: "))
		return redlimit.Calendar{}, false
	}
	return cal, true
}

// parseReplaces parses a replaces list of the rule named self.
func (p *parser) parseReplaces(f field, self string) []string {
	items, ok := p.sequence(f)
	if !ok {
		return nil
	}
	var names []string
	for i, item := range items {
		path := fmt.Sprintf("%s[%d]", f.path, i)
		fields, ok := p.mapping(item, path, replacesKeys)
		if !ok {
			continue
		}
		nf, ok := fields["name"]
		if !ok {
			p.errorf(deref(item).Line, joinPath(path, "name"), nil, "missing")
			continue
		}
		name, ok := p.str(nf)
		switch {
		case !ok:
		case name == "":
			p.errorf(nf.line(), nf.path, nil, "empty")
		case name == self:
			p.errorf(nf.line(), nf.path, nil, "a rule cannot replace itself (%q)", name)
		default:
			names = append(names, name)
			p.replaces = append(p.replaces, nf)
		}
	}
	return names
}

const algorithmNames = "fixed_window, sliding_log, sliding_window, token_bucket"

func (p *parser) parseAlgorithm(f field) (redlimit.Algorithm, bool) {
	s, ok := p.str(f)
	if !ok {
		return 0, false
	}
	a, err := redlimit.ParseAlgorithm(strings.ToLower(s))
	if err != nil {
		p.errorf(f.line(), f.path, redlimit.ErrUnknownAlgorithm, "unknown algorithm %q (want %s)", s, algorithmNames)
		return 0, false
	}
	return a, true
}

func (p *parser) parseCounting(f field) (Counting, bool) {
	s, ok := p.str(f)
	if !ok {
		return 0, false
	}
	c, err := ParseCounting(strings.ToLower(s))
	if err != nil {
		p.errorf(f.line(), f.path, nil, "unknown counting %q (want %s)", s, countingList)
		return 0, false
	}
	return c, true
}

func (p *parser) parseFailure(f field) (redlimit.FailurePolicy, bool) {
	s, ok := p.str(f)
	if !ok {
		return 0, false
	}
	fp, err := redlimit.ParseFailurePolicy(strings.ToLower(s))
	if err != nil {
		p.errorf(f.line(), f.path, redlimit.ErrInvalidLimit, "unknown failure policy %q (want local, fail_open, fail_closed)", s)
		return 0, false
	}
	return fp, true
}
