package config

import (
	"encoding/json"

	"github.com/redlimit/redlimit"
)

// RuleView is the JSON form of a [Rule], as GET /rules serves it. The
// limit's fields are spelled as in a rule file.
type RuleView struct {
	Domain string `json:"domain"`
	Path   string `json:"path"`
	Name   string `json:"name,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`

	Unlimited bool `json:"unlimited"`
	// DenyAll: requests_per_unit is 0, every request is denied.
	DenyAll bool `json:"deny_all,omitempty"`
	// Unit and RequestsPerUnit are the rule's rate; empty when Unlimited.
	Unit            string `json:"unit,omitempty"`
	RequestsPerUnit int64  `json:"requests_per_unit,omitempty"`
	// Period is the unit as a Go duration, such as "1m0s".
	Period        string `json:"period,omitempty"`
	Algorithm     string `json:"algorithm,omitempty"`
	Burst         int64  `json:"burst,omitempty"` // token_bucket only
	FailurePolicy string `json:"failure_policy,omitempty"`

	ShadowMode     bool     `json:"shadow_mode"`
	DetailedMetric bool     `json:"detailed_metric"`
	Replaces       []string `json:"replaces,omitempty"`
}

// View returns the JSON form of r.
func (r *Rule) View() RuleView {
	v := RuleView{
		Domain:         r.Domain,
		Path:           r.Path,
		Name:           r.Name,
		File:           r.File,
		Line:           r.Line,
		Unlimited:      r.Unlimited,
		DenyAll:        r.DenyAll,
		ShadowMode:     r.Shadow,
		DetailedMetric: r.DetailedMetric,
		Replaces:       r.Replaces,
	}
	if !r.Unlimited {
		v.Unit = r.Unit
		v.RequestsPerUnit = r.Limit.Count
		v.Period = r.Limit.Period.String()
		v.Algorithm = r.Limit.Algorithm.String()
		v.FailurePolicy = r.Limit.Failure.String()
		if r.Limit.Algorithm == redlimit.TokenBucket && !r.DenyAll {
			v.Burst = r.Limit.Burst
		}
	}
	return v
}

// MarshalJSON encodes r as its [RuleView].
func (r *Rule) MarshalJSON() ([]byte, error) { return json.Marshal(r.View()) }
