package config

import "fmt"

// replaceRef is a name in a rule's replaces, and where it was written.
type replaceRef struct {
	name, file string
	line       int
	field      string
}

// merge returns ds with the domains of one name merged into the first of
// them. envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG merges the files of one
// domain the same way. The top-level descriptors of each later file are
// appended to the first's. Two of them with one envoy name (key, or
// key_value) in two files are an error, as within one file. Each file
// keeps its own defaults (algorithm, failure_policy, counting). Its rules
// hold them already. The replaces names of every rule are then checked
// against the rule names of the whole domain. The domain's refs keep
// them.
func merge(ds []*Domain) ([]*Domain, []error) {
	var (
		out    []*Domain
		errs   []error
		byName = make(map[string]*Domain, len(ds))
		tops   = make(map[*Domain]map[string]*Descriptor, len(ds))
	)
	for _, d := range ds {
		first, seen := byName[d.Name]
		if !seen {
			byName[d.Name] = d
			out = append(out, d)
			top := make(map[string]*Descriptor, len(d.Descriptors))
			for _, x := range d.Descriptors {
				top[envoyName(x)] = x
			}
			tops[d] = top
			continue
		}
		top := tops[first]
		for i, x := range d.Descriptors {
			name := envoyName(x)
			if prev, dup := top[name]; dup {
				errs = append(errs, &Error{File: d.File, Line: x.Line, Field: fmt.Sprintf("descriptors[%d]", i),
					Msg: fmt.Sprintf("descriptor %s has the path %q of descriptor %s in %s at line %d (the files of domain %q are merged)",
						describe(x), d.Name+"."+name, describe(prev), prev.File, prev.Line, d.Name)})
				continue
			}
			top[name] = x
			first.Descriptors = append(first.Descriptors, x)
		}
		first.Files = append(first.Files, d.Files...)
		first.refs = append(first.refs, d.refs...)
	}
	for _, d := range out {
		errs = append(errs, d.checkReplaces()...)
	}
	return out, errs
}

// checkReplaces reports every name of d's refs that no rule of d has, and
// forgets the refs.
func (d *Domain) checkReplaces() []error {
	if len(d.refs) == 0 {
		return nil
	}
	names := make(map[string]bool)
	for _, r := range d.Rules() {
		if r.Name != "" {
			names[r.Name] = true
		}
	}
	var errs []error
	for _, ref := range d.refs {
		if !names[ref.name] {
			errs = append(errs, &Error{File: ref.file, Line: ref.line, Field: ref.field,
				Msg: fmt.Sprintf("no rule of domain %q is named %q", d.Name, ref.name)})
		}
	}
	d.refs = nil
	return errs
}

// envoyName returns the name envoyproxy/ratelimit gives a descriptor
// among its siblings: key_value, or key when it has no value.
func envoyName(d *Descriptor) string {
	if d.Value == "" {
		return d.Key
	}
	return d.Key + "_" + d.Value
}
