package config

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// maxMetadataDepth bounds how deep a descriptor's metadata may nest: a
// protobuf message may nest at most 10,000 deep to be marshalled, and
// metadata that Envoy routes on is a few levels deep.
const maxMetadataDepth = 32

// metadata parses a descriptor's metadata: a mapping of any keys to any
// values, as envoyproxy/ratelimit takes it, into the Struct the service
// returns. A null or empty mapping is nil.
func (p *parser) metadata(f field) *structpb.Struct {
	if isNull(f.val) {
		return nil
	}
	v := p.metaValue(f.val, f.path, 0)
	s := v.GetStructValue()
	if v != nil && s == nil {
		p.errorf(f.line(), f.path, nil, "want a mapping, got %s", kindName(deref(f.val)))
		return nil
	}
	if len(s.GetFields()) == 0 {
		return nil
	}
	return s
}

// metaValue converts one node of metadata, at depth, or returns nil after
// reporting what is wrong with it.
func (p *parser) metaValue(item *yaml.Node, path string, depth int) *structpb.Value {
	if !p.spend(1, item.Line, path, "aliases") {
		return nil
	}
	n := deref(item)
	if depth > maxMetadataDepth {
		p.errorf(n.Line, path, nil, "metadata nests more than %d deep", maxMetadataDepth)
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		fields, _ := p.mapping(n, path, nil)
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(fields))}
		good := true
		for name, f := range fields {
			v := p.metaValue(f.val, f.path, depth+1)
			if v == nil {
				good = false
				continue
			}
			s.Fields[name] = v
		}
		if !good {
			return nil
		}
		return structpb.NewStructValue(s)
	case yaml.SequenceNode:
		l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(n.Content))}
		for i, c := range n.Content {
			v := p.metaValue(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if v == nil {
				return nil
			}
			l.Values = append(l.Values, v)
		}
		return structpb.NewListValue(l)
	case yaml.ScalarNode:
		return p.metaScalar(n, path)
	}
	p.errorf(n.Line, path, nil, "want a value, got %s", kindName(n))
	return nil
}

// metaScalar converts a scalar as envoyproxy/ratelimit's YAML 1.1 parser
// reads it: null, a boolean (yes, no, on, off, y and n too, unquoted), a
// number, or else the text as written (a timestamp included).
func (p *parser) metaScalar(n *yaml.Node, path string) *structpb.Value {
	switch n.ShortTag() {
	case "!!null":
		return structpb.NewNullValue()
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return structpb.NewBoolValue(b)
		}
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			p.errorf(n.Line, path, nil, "want a number, got %q", n.Value)
			return nil
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			// JSON, and so /json and Envoy's metadata, has no such number.
			p.errorf(n.Line, path, nil, "%q is not a finite number", n.Value)
			return nil
		}
		return structpb.NewNumberValue(f)
	case "!!str":
		if n.Style == 0 || n.Style == yaml.FlowStyle {
			if b, ok := yaml11Bools[n.Value]; ok {
				return structpb.NewBoolValue(b)
			}
		}
	}
	return structpb.NewStringValue(n.Value)
}

// yaml11Bools are the plain scalars YAML 1.1 reads as booleans and YAML
// 1.2 as strings (true and false are booleans in both).
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}
