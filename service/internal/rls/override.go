package rls

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// DefaultMaxOverridePeriod is the longest period a limit override may have
// by default: a year (365 days), envoy's longest unit. So every override
// Envoy can send without a unit_multiplier is taken.
const DefaultMaxOverridePeriod = 365 * 24 * time.Hour

// OverridePolicy says which limit overrides the service takes. An override
// is a descriptor's own limit, which Envoy sends from route metadata.
// Whatever the policy, an override's period is at most
// Options.MaxOverridePeriod. An override of a sliding_log rule has at most
// the rule's count. A sliding log keeps an entry per request it admits,
// for a period. So its count is the memory one key may hold. The
// configuration sets that, not the client.
type OverridePolicy uint8

const (
	// OverridesAllow, the zero value, takes every override, as
	// envoyproxy/ratelimit does: the override replaces the rule's limit,
	// higher or lower, and applies where no rule matches.
	OverridesAllow OverridePolicy = iota
	// OverridesNoRaise takes an override only if it does not raise the
	// limit of the rule it matched. Its count is at most the rule's count
	// (a token bucket's burst). Its rate (count per period) is at most the
	// rule's. An override matching no rule, or an unlimited rule, lowers
	// nothing and is taken. One matching a deny-all rule is refused.
	//
	// The rule's own limit is decided with the override, and both count
	// what they admit. Another period or key is another state, which would
	// start full; with both decided, the override never admits more than
	// the rule alone would. A rule in shadow mode admits all, so it is not
	// decided with the override.
	OverridesNoRaise
	// OverridesRefuse refuses every override.
	OverridesRefuse
)

var overridePolicyNames = [...]string{"allow", "no-raise", "refuse"}

// String returns the policy's name: "allow", "no-raise" or "refuse".
func (p OverridePolicy) String() string {
	if int(p) < len(overridePolicyNames) {
		return overridePolicyNames[p]
	}
	return fmt.Sprintf("OverridePolicy(%d)", uint8(p))
}

// MarshalText returns the policy's name.
func (p OverridePolicy) MarshalText() ([]byte, error) {
	if int(p) >= len(overridePolicyNames) {
		return nil, fmt.Errorf("rls: unknown override policy %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText sets p to the policy named text: "allow", "no-raise" or
// "refuse".
func (p *OverridePolicy) UnmarshalText(text []byte) error {
	for i, name := range overridePolicyNames {
		if string(text) == name {
			*p = OverridePolicy(i)
			return nil
		}
	}
	return fmt.Errorf("rls: unknown override policy %q (want allow, no-raise or refuse)", text)
}

// checkOverrideRule checks the override lim of descriptor i against the
// rule it matched (nil if none) and the policy. validate has checked the
// policy's refusal and the period.
func (s *Service) checkOverrideRule(lim redlimit.Limit, rule *config.Rule, i int) error {
	if rule == nil || rule.Unlimited {
		return nil
	}
	what := func() string {
		return fmt.Sprintf("descriptor %d: limit override %d per %s", i, lim.Count, periodName(lim))
	}
	if rule.Limit.Algorithm == redlimit.SlidingLog && lim.Count > rule.Limit.Count {
		return fmt.Errorf("%w: %s: a sliding log keeps an entry per request admitted: its count may not exceed rule %s's %d",
			ErrInvalidRequest, what(), rule.Path, rule.Limit.Count)
	}
	if s.opts.Overrides != OverridesNoRaise {
		return nil
	}
	if rule.DenyAll {
		return fmt.Errorf("%w: %s raises rule %s (deny all): this service takes overrides that lower a rule's limit only",
			ErrInvalidRequest, what(), rule.Path)
	}
	if raises(lim, rule.Limit) {
		return fmt.Errorf("%w: %s raises rule %s (%d per %s): this service takes overrides that lower a rule's limit only",
			ErrInvalidRequest, what(), rule.Path, rule.Limit.Count, periodName(rule.Limit))
	}
	return nil
}

// periodName names l's period for an error: a calendar's own, not its longest.
func periodName(l redlimit.Limit) string {
	if !l.Calendar.IsZero() {
		return "calendar " + l.Calendar.String()
	}
	return l.Period.String()
}

// keepRule has it, an override of rule, decided together with the rule's
// own limit on ruleKey, under OverridesNoRaise. The exceptions: the
// override uses the rule's own state, whose limit it lowers; or the rule
// never denies.
func (s *Service) keepRule(it *item, rule *config.Rule, ruleKey string) {
	if s.opts.Overrides != OverridesNoRaise || rule == nil || rule.Unlimited || rule.Shadow ||
		rule.Limit.StateID(ruleKey) == it.limit.StateID(it.key) {
		return
	}
	it.ruleKey, it.ruleLimit = ruleKey, rule.Limit
}

// raises reports whether the override o admits more than the rule's limit
// r. It may admit more at once: o's count above r.Max, a token bucket's
// burst or the count. Or it may admit more over time: o.Count/o.Period
// above r.Count/r.Period. That is compared exactly, as
// o.Count*r.Period > r.Count*o.Period in 128 bits.
func raises(o, r redlimit.Limit) bool {
	if o.Count > r.Max() {
		return true
	}
	oh, ol := bits.Mul64(uint64(o.Count), uint64(r.Period))
	rh, rl := bits.Mul64(uint64(r.Count), uint64(o.Period))
	return oh > rh || oh == rh && ol > rl
}
