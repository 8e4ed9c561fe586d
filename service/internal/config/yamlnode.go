package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// field is one key of a mapping with its value.
type field struct {
	key, val *yaml.Node
	path     string // the field's path in errors, such as "descriptors[0].key"
}

// line returns the line of the field's value, or of its key when the value
// has none.
func (f field) line() int {
	if f.val != nil && f.val.Line > 0 {
		return f.val.Line
	}
	return f.key.Line
}

// deref returns the node an alias stands for, or n itself.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or a YAML null ("~", "null", nothing).
func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName names a node's kind for errors.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// mapping returns the fields of the mapping n, keyed by name. n's path is
// path ("" at the top). It reports an error and returns ok false if n is
// not a mapping. It reports keys that are not in allowed, or given twice,
// and leaves them out. A nil allowed allows any. Merge keys
// ("<<: *anchor") are expanded. The mapping's own keys win over merged
// ones.
func (p *parser) mapping(n *yaml.Node, path string, allowed []string) (fields map[string]field, ok bool) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, path, nil, "want a mapping, got %s", kindName(n))
		return nil, false
	}
	fields = make(map[string]field, len(n.Content)/2)
	p.addFields(fields, n, path, allowed, map[*yaml.Node]bool{n: true}, n.Line, 0)
	return fields, true
}

// addFields adds the keys of the mapping n that fields does not hold yet,
// then those of the mappings n merges, unless merged already. The mapping
// being parsed is at line; depth is how many merges led from it to n. Each
// key visited is spent from the parser's nodes left.
func (p *parser) addFields(fields map[string]field, n *yaml.Node, path string, allowed []string, merged map[*yaml.Node]bool, line, depth int) {
	what := "aliases"
	if depth > 0 {
		what = "merge keys (<<)"
	}
	if !p.spend(len(n.Content)/2, line, path, what) {
		return
	}
	var merges []*yaml.Node
	seen := make(map[string]int, len(n.Content)/2) // key → line, this mapping's own keys
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k.Line, path, nil, "want a key name, got %s", kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		fp := joinPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			hint := ""
			if fp == "domain" {
				hint = "; a file holds one domain"
			}
			p.errorf(k.Line, fp, nil, "given twice (first at line %d)%s", first, hint)
			continue
		}
		seen[k.Value] = k.Line
		if allowed != nil && !contains(allowed, k.Value) {
			p.errorf(k.Line, fp, nil, "unknown key%s (want %s)", suggest(k.Value, allowed), strings.Join(allowed, ", "))
			continue
		}
		if _, set := fields[k.Value]; !set {
			fields[k.Value] = field{key: k, val: v, path: fp}
		}
	}
	if len(merges) > 0 && depth == maxMergeDepth {
		p.errorf(line, path, nil, "merge keys (<<) nest more than %d deep", maxMergeDepth)
		return
	}
	for _, m := range merges {
		if p.stopped() {
			return
		}
		m = deref(m)
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = m.Content
		}
		for _, s := range sources {
			if s = deref(s); s.Kind != yaml.MappingNode {
				p.errorf(s.Line, path, nil, "a merge key (<<) takes a mapping or a list of mappings, got %s", kindName(s))
				continue
			}
			if !merged[s] { // a mapping merged twice, or into itself, adds nothing
				merged[s] = true
				p.addFields(fields, s, path, allowed, merged, line, depth+1)
			}
		}
		if len(sources) == 0 {
			p.errorf(m.Line, path, nil, "a merge key (<<) takes a mapping or a list of mappings, got %s", kindName(m))
		}
	}
}

// str returns the text of a scalar field; a null is "". Numbers and
// booleans are taken as written ("value: 500" is the value "500"), as
// envoyproxy/ratelimit does.
func (p *parser) str(f field) (string, bool) {
	n := deref(f.val)
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n.Line, f.path, nil, "want a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// boolean returns the value of a boolean field; a null is false. Besides
// true and false it accepts YAML 1.1's yes, no, on and off, as
// envoyproxy/ratelimit's YAML parser does.
func (p *parser) boolean(f field) (bool, bool) {
	n := deref(f.val)
	if isNull(n) {
		return false, true
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		p.errorf(n.Line, f.path, nil, "want true or false, got %s", kindName(n))
		return false, false
	}
	return b, true
}

// integer returns the value of an integer field. Callers check null first.
func (p *parser) integer(f field) (int64, bool) {
	n := deref(f.val)
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		p.errorf(n.Line, f.path, nil, "want a whole number, got %s", kindName(n))
		return 0, false
	}
	return v, true
}

// sequence returns the items of a list field; a null is an empty list.
func (p *parser) sequence(f field) ([]*yaml.Node, bool) {
	n := deref(f.val)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n.Line, f.path, nil, "want a list, got %s", kindName(n))
		return nil, false
	}
	return n.Content, true
}

// countNodes returns the number of nodes in the tree under n, not following
// aliases.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// suggest returns `, did you mean "x"?` for the allowed name nearest to
// s, if one is near, and "" otherwise.
func suggest(s string, allowed []string) string {
	best, bestDist := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(s), a); d < bestDist {
			best, bestDist = a, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// editDistance returns the Levenshtein distance of a and b, capped at 3 for
// long inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 3
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
