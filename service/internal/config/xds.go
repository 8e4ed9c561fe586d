package config

import (
	"fmt"
	"strings"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// XDSPrefix starts the name of a RateLimitConfig resource where a file
// name would be: in Config.Files and in errors.
const XDSPrefix = "xds:"

// FromXDS returns the configuration that RateLimitConfig resources hold, as
// an xDS server (Envoy Gateway, say) sends them. Each resource is written
// as the rule file it stands for and parsed as one, so it is checked as a
// file is; its errors name it "xds:NAME". MergeDomains and
// DefaultAlgorithm apply as to files; the caps on bytes do not (the xDS
// client caps a message).
func (l Loader) FromXDS(resources []*rlsconf.RateLimitConfig) (*Config, error) {
	domains := make([]*Domain, 0, len(resources))
	var errs []error
	for i, r := range resources {
		if r == nil {
			errs = append(errs, &Error{File: fmt.Sprintf("%sresource %d", XDSPrefix, i), Msg: "empty resource", Err: ErrInvalid})
			continue
		}
		name := XDSPrefix + r.GetName()
		data, err := yaml.Marshal(xdsFile(r))
		if err != nil {
			errs = append(errs, &Error{File: name, Msg: "cannot be written as YAML", Err: fmt.Errorf("%w: %w", ErrInvalid, err)})
			continue
		}
		d, err := parse(name, data, true, l.DefaultAlgorithm)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		domains = append(domains, d)
	}
	return assemble(domains, errs, l.MergeDomains)
}

// The rule file a RateLimitConfig stands for, field by field as
// envoyproxy/ratelimit reads it: its rule files' keys, in their order.
type (
	xdsRoot struct {
		Domain      string          `yaml:"domain"`
		Descriptors []xdsDescriptor `yaml:"descriptors,omitempty"`
	}
	xdsDescriptor struct {
		Key            string          `yaml:"key"`
		Value          string          `yaml:"value,omitempty"`
		RateLimit      *xdsRateLimit   `yaml:"rate_limit,omitempty"`
		Descriptors    []xdsDescriptor `yaml:"descriptors,omitempty"`
		ShadowMode     bool            `yaml:"shadow_mode,omitempty"`
		DetailedMetric bool            `yaml:"detailed_metric,omitempty"`
	}
	xdsRateLimit struct {
		Unit            string       `yaml:"unit,omitempty"`
		RequestsPerUnit *uint32      `yaml:"requests_per_unit,omitempty"`
		Unlimited       bool         `yaml:"unlimited,omitempty"`
		Name            string       `yaml:"name,omitempty"`
		Replaces        []xdsReplace `yaml:"replaces,omitempty"`
	}
	xdsReplace struct {
		Name string `yaml:"name"`
	}
)

func xdsFile(r *rlsconf.RateLimitConfig) xdsRoot {
	return xdsRoot{Domain: r.GetDomain(), Descriptors: xdsDescriptors(r.GetDescriptors())}
}

func xdsDescriptors(ds []*rlsconf.RateLimitDescriptor) []xdsDescriptor {
	out := make([]xdsDescriptor, 0, len(ds))
	for _, d := range ds {
		out = append(out, xdsDescriptor{
			Key:            d.GetKey(),
			Value:          d.GetValue(),
			RateLimit:      xdsPolicy(d.GetRateLimit()),
			Descriptors:    xdsDescriptors(d.GetDescriptors()),
			ShadowMode:     d.GetShadowMode(),
			DetailedMetric: d.GetDetailedMetric(),
		})
	}
	return out
}

// xdsPolicy returns a rate_limit. An unlimited one has no unit nor count;
// a limited one has both, its unit UNKNOWN when the resource sets none.
func xdsPolicy(p *rlsconf.RateLimitPolicy) *xdsRateLimit {
	if p == nil {
		return nil
	}
	out := &xdsRateLimit{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if !out.Unlimited {
		n := p.GetRequestsPerUnit()
		out.RequestsPerUnit = &n
		if p.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
			out.Unit = strings.ToLower(p.GetUnit().String())
		}
	}
	for _, r := range p.GetReplaces() {
		out.Replaces = append(out.Replaces, xdsReplace{Name: r.GetName()})
	}
	return out
}
