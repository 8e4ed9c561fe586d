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
	// Unit, UnitMultiplier and RequestsPerUnit are the rule's rate;
	// empty when Unlimited. UnitMultiplier is how many units make the
	// period, when more than 1.
	Unit            string `json:"unit,omitempty"`
	UnitMultiplier  uint32 `json:"unit_multiplier,omitempty"`
	RequestsPerUnit int64  `json:"requests_per_unit,omitempty"`
	// Period is the unit times its multiplier as a Go duration, such as
	// "1m0s".
	Period string `json:"period,omitempty"`
	// TimeZone, when set, makes the unit a calendar period in that zone
	// ("UTC" for UTC); Period is then the unit's longest.
	TimeZone      string `json:"time_zone,omitempty"`
	Algorithm     string `json:"algorithm,omitempty"`
	Burst         int64  `json:"burst,omitempty"` // token_bucket only
	FailurePolicy string `json:"failure_policy,omitempty"`

	ShadowMode     bool     `json:"shadow_mode"`
	DetailedMetric bool     `json:"detailed_metric"`
	Replaces       []string `json:"replaces,omitempty"`
	QuotaMode      bool     `json:"quota_mode,omitempty"`
	// Counting is the rule's or its file's counting, "" when neither sets
	// it (the service's then applies).
	Counting string `json:"counting,omitempty"`
	// Metadata is the descriptor's metadata, as JSON.
	Metadata map[string]any `json:"metadata,omitempty"`
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
		QuotaMode:      r.QuotaMode,
		Counting:       r.Counting.String(),
	}
	if r.Metadata != nil {
		v.Metadata = r.Metadata.AsMap()
	}
	if !r.Unlimited {
		v.Unit = r.Unit
		if r.UnitMultiplier > 1 {
			v.UnitMultiplier = r.UnitMultiplier
		}
		v.RequestsPerUnit = r.Limit.Count
		v.Period = r.Limit.Period.String()
		if c := r.Limit.Calendar; !c.IsZero() {
			v.TimeZone = c.Zone
			if v.TimeZone == "" {
				v.TimeZone = "UTC"
			}
		}
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
