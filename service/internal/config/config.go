package config

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

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
	// File is the file the domain came from: the first of Files.
	File string `json:"file"`
	// Files are the files the domain came from, in the order they were
	// merged: File alone, unless [Loader].MergeDomains merged several.
	Files []string `json:"files,omitempty"`
	// Descriptors are the top-level descriptors, in file order.
	Descriptors []*Descriptor `json:"descriptors"`

	index   *index       // of Descriptors, if it has many
	indexed bool         // whether buildIndex ran: by Parse or New
	refs    []replaceRef // replaces names not checked yet: see merge
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
	// File and Line say where the descriptor starts.
	File string `json:"-"`
	Line int    `json:"line"`
	// ValueToMetric is envoy's value_to_metric: the metrics of a rule
	// matched through this descriptor name the request's value at this
	// level (see [Rule.MetricName]). It changes no decision.
	ValueToMetric bool `json:"value_to_metric,omitempty"`
	// ShareThreshold is envoy's share_threshold, on a descriptor whose
	// Value is a wildcard: every value it matches counts against one
	// limit, whose key holds the pattern instead of the request's value
	// (see [KeyValue]). It applies to the rule matched through this
	// descriptor, at its depth or deeper.
	ShareThreshold bool `json:"share_threshold,omitempty"`

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
	// UnitMultiplier is rate_limit.unit_multiplier: how many units make
	// the period (Limit.Period is Unit times UnitMultiplier). 1 when the
	// file gives none, 0 when Unlimited; 0 in a rule built by hand means 1.
	UnitMultiplier uint32
	// Shadow (shadow_mode) rules decide and count but never deny.
	Shadow bool
	// DetailedMetric asks for metrics labelled by the request's values.
	DetailedMetric bool
	// Replaces names the rules (by Name) this rule replaces when both match.
	// Every name is the Name of a rule of the same domain.
	Replaces []string
	// QuotaMode (quota_mode) rules are quotas: a request is denied for
	// them only when every quota it carries has nothing left (see package
	// rls).
	QuotaMode bool
	// Metadata is the descriptor's metadata, which the service returns as
	// the response's dynamic metadata when the request passes this rule;
	// nil when there is none. It must not be modified.
	Metadata *structpb.Struct
	// Counting is how the rule counts hits that do not fit: the rule's
	// counting, else its file's; CountingDefault when neither says, which
	// leaves it to the service.
	Counting Counting

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

// New returns a Config of the given domains, as [Load] does for the
// domains of its files. It reports two domains of the same name as an
// error wrapping [ErrInvalid]. It indexes the descriptors of domains not
// built by [Parse] for [Config.Match]. New takes ownership of the domains:
// do not modify them afterwards.
func New(domains ...*Domain) (*Config, error) {
	c := &Config{Domains: make(map[string]*Domain, len(domains))}
	var errs []error
	for _, d := range domains {
		if prev, ok := c.Domains[d.Name]; ok {
			errs = append(errs, &Error{File: d.File, Field: "domain",
				Msg: fmt.Sprintf("domain %q is already defined in %s (one file per domain, unless merged: --merge-domains, as envoy's MERGE_DOMAIN_CONFIG)", d.Name, prev.File)})
			continue
		}
		if !d.indexed {
			d.buildIndex()
		}
		c.Domains[d.Name] = d
		switch {
		case len(d.Files) > 0:
			c.Files = append(c.Files, d.Files...)
		case d.File != "":
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
