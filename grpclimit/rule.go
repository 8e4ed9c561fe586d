package grpclimit

import (
	"errors"
	"fmt"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
)

// ErrNoKey is returned, wrapped, by a [KeyFunc] when its rule does not apply
// to a call: the rule is skipped for that call. It is [httplimit.ErrNoKey],
// so either can be returned.
var ErrNoKey = httplimit.ErrNoKey

// ErrNoRules reports an interceptor made without rules.
var ErrNoRules = errors.New("grpclimit: no rules")

// ErrInvalidRule reports a rule that cannot be used: a bad name, a missing
// key function, a bad cost or too many rules. Invalid limits wrap the
// redlimit sentinel errors instead.
var ErrInvalidRule = errors.New("grpclimit: invalid rule")

// A Rule is one limit that the calls an [Interceptor] handles answer to.
type Rule struct {
	// Name identifies the rule: in limiter keys, in the rate-limit
	// metadata, in status details and in logs. 1 to 64 ASCII letters,
	// digits, '.', '_' and '-'; unique in an interceptor. The limiter key
	// of a call is Name, ':' and the key from Key.
	Name string
	// Limit is how much the key may do.
	Limit redlimit.Limit
	// Key returns the key a call counts under; see [KeyFunc].
	Key KeyFunc
	// Cost is what one call (or one stream) costs, 1..Limit.Max(); 0
	// means 1.
	Cost int64
	// Shadow runs the rule as a dry run: it decides, counts, logs what it
	// would deny and shows in the metadata, but never denies. Shadow rules
	// are decided after the enforced ones, only for calls they allow, as in
	// httplimit.
	Shadow bool
}

const maxNameLen = 64

func validateRules(rules []Rule) ([]Rule, error) {
	if len(rules) == 0 {
		return nil, ErrNoRules
	}
	out := make([]Rule, len(rules))
	seen := make(map[string]bool, len(rules))
	enforced, shadow := 0, 0
	for i, r := range rules {
		if err := validName(r.Name); err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%w: two rules are named %q", ErrInvalidRule, r.Name)
		}
		seen[r.Name] = true
		if err := r.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: rule %q: %w", r.Name, err)
		}
		if r.Key == nil {
			return nil, fmt.Errorf("%w: rule %q has no key function", ErrInvalidRule, r.Name)
		}
		if r.Cost == 0 {
			r.Cost = 1
		}
		if r.Cost < 1 || r.Cost > r.Limit.Max() {
			return nil, fmt.Errorf("%w: rule %q: cost %d is not in 1..%d, so no call could pass", ErrInvalidRule, r.Name, r.Cost, r.Limit.Max())
		}
		if r.Shadow {
			shadow++
		} else {
			enforced++
		}
		out[i] = r
	}
	if enforced > redlimit.MaxRequests || shadow > redlimit.MaxRequests {
		return nil, fmt.Errorf("%w: %d enforced and %d shadow rules, at most %d of each", ErrInvalidRule, enforced, shadow, redlimit.MaxRequests)
	}
	return out, nil
}

func validName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: name %q is not 1..%d bytes long", ErrInvalidRule, name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: name %q holds %q: use letters, digits, '.', '_' and '-'", ErrInvalidRule, name, c)
		}
	}
	return nil
}
