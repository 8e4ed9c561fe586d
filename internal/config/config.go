package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// Config is one loaded set of rule files: one domain per file.
//
// A Config is immutable once built by [Load] or [New]: do not modify it or
// anything it points to. It is then safe for concurrent use.
type Config struct {
	// Domains maps a domain name to its rules.
	Domains map[string]*Domain `json:"domains"`
	// Files lists the files loaded, in order.
	Files []string `json:"files"`
}

// Domain is the rule tree of one domain.
type Domain struct {
	Name string `json:"name"`
	// File is the file the domain came from.
	File string `json:"file"`
	// Descriptors are the top-level descriptors, in file order.
	Descriptors []*Descriptor `json:"descriptors"`

	index   *index // of Descriptors, if it has many
	indexed bool   // whether buildIndex ran: by Parse or New
}

// Descriptor is one node of a domain's tree: a key, an optional value
// (exact, or a wildcard: a value holding "*", such as a prefix "foo*"), an
// optional rule, children.
type Descriptor struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"` // "" matches any value of Key (the key-alone rule)
	// Rule is nil when there is no limit at this depth.
	Rule        *Rule         `json:"rule,omitempty"`
	Descriptors []*Descriptor `json:"descriptors,omitempty"`
	Line        int           `json:"line"` // where it starts in File
	// ValueToMetric is envoy's value_to_metric: metrics may name the
	// request's value at this level. Recorded; it changes no decision.
	ValueToMetric bool `json:"value_to_metric,omitempty"`

	index *index // of Descriptors, if there are many and Parse or New built it
}

// Rule is the limit of one descriptor node.
type Rule struct {
	// Name is rate_limit.name, or "" when none is given.
	Name string
	// Path identifies the node for metrics and /rules: the domain, then
	// key or key_value for each level, joined by ".", e.g.
	// "api.remote_address.path_/login". Paths are unique in a domain.
	Path string
	// Limit is the limit (algorithm, count, period, burst, failure policy).
	// Zero when Unlimited; with a Count of 0 when DenyAll; valid
	// ([redlimit.Limit.Validate]) otherwise.
	Limit redlimit.Limit
	// Unlimited rules always allow; their remaining is 4294967295.
	Unlimited bool
	// DenyAll rules (requests_per_unit: 0, envoyproxy/ratelimit's way to
	// block a descriptor) deny every request without counting it. Their
	// Limit keeps the unit, algorithm and failure policy of the file.
	DenyAll bool
	// Unit is the envoy unit name ("second", "minute", ...) the period came
	// from, in lower case; "" when Unlimited.
	Unit string
	// Shadow (shadow_mode) rules decide and count but never deny.
	Shadow bool
	// DetailedMetric asks for metrics labelled by the request's values.
	DetailedMetric bool
	// Replaces names the rules (by Name) this rule replaces when both match.
	// Every name is the Name of a rule of the same domain.
	Replaces []string

	// Domain is the domain the rule belongs to.
	Domain string
	// File and Line say where the rule's descriptor starts.
	File string
	Line int
}

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key, Value string
}

// Units maps envoy's unit names to periods. A month is 30 days and a year
// 365, as in envoyproxy/ratelimit.
var Units = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
	"month":  30 * 24 * time.Hour,
	"year":   365 * 24 * time.Hour,
}

// unitNames lists the units in the order error messages give them.
const unitNames = "second, minute, hour, day, week, month, year"

// New returns a Config of the given domains, as [Load] does for the domains
// of its files: it reports two domains of the same name as an error wrapping
// [ErrInvalid], and indexes the descriptors of domains not built by [Parse]
// for [Config.Match]. New takes ownership of the domains: do not modify them
// afterwards.
func New(domains ...*Domain) (*Config, error) {
	c := &Config{Domains: make(map[string]*Domain, len(domains))}
	var errs []error
	for _, d := range domains {
		if prev, ok := c.Domains[d.Name]; ok {
			errs = append(errs, &Error{File: d.File, Field: "domain",
				Msg: fmt.Sprintf("domain %q is already defined in %s (one file per domain)", d.Name, prev.File)})
			continue
		}
		if !d.indexed {
			d.buildIndex()
		}
		c.Domains[d.Name] = d
		if d.File != "" {
			c.Files = append(c.Files, d.File)
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return c, nil
}

// Rules returns every rule of c: domains in name order, and each domain's
// rules depth-first in file order. The slice is new; the rules are c's and
// must not be modified.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.Domains))
	for name := range c.Domains {
		names = append(names, name)
	}
	slices.Sort(names)
	var rules []*Rule
	for _, name := range names {
		rules = appendRules(rules, c.Domains[name].Descriptors)
	}
	return rules
}

// Rules returns the rules of d depth-first in file order. The slice is new;
// the rules are d's and must not be modified.
func (d *Domain) Rules() []*Rule {
	return appendRules(nil, d.Descriptors)
}

func appendRules(rules []*Rule, ds []*Descriptor) []*Rule {
	for _, d := range ds {
		if d.Rule != nil {
			rules = append(rules, d.Rule)
		}
		rules = appendRules(rules, d.Descriptors)
	}
	return rules
}
