package httplimit

import (
	"fmt"

	"github.com/redlimit/redlimit"
)

// maxNameLen bounds a rule's name.
const maxNameLen = 64

// A Rule is one limit that the requests a middleware handles answer to.
type Rule struct {
	// Name identifies the rule: in limiter keys, in the RateLimit and
	// RateLimit-Policy fields, in problem bodies and in logs. 1 to 64
	// ASCII letters, digits, '.', '_' and '-'; unique in a middleware.
	//
	// The limiter key of a request is Name, ':' and the key from Key, so
	// rules with different names never share state, and rules with the same
	// name and limit in different middlewares (on different routes) do.
	Name string
	// Limit is how much the key may do.
	Limit redlimit.Limit
	// Key returns the key a request counts under; see [KeyFunc].
	Key KeyFunc
	// Cost is what one request costs, 1..Limit.Max(); 0 means 1.
	Cost int64
	// Shadow runs the rule as a dry run: it decides, counts, logs what it
	// would deny and shows in the headers, but never denies.
	//
	// Enforced rules are decided together, in one [redlimit.Limiter.AllowAll]
	// call, and shadow rules after them, only for requests the enforced rules
	// allow: each shadow rule counts the requests actually served as if it
	// alone were added to the enforced ones, and never makes the enforced
	// rules consume or refuse anything.
	Shadow bool
}

// validate checks r and returns it with its defaults filled in.
func (r Rule) validate() (Rule, error) {
	if err := validName(r.Name); err != nil {
		return r, err
	}
	if err := r.Limit.Validate(); err != nil {
		return r, fmt.Errorf("httplimit: rule %q: %w", r.Name, err)
	}
	if r.Key == nil {
		return r, fmt.Errorf("%w: rule %q has no key function", ErrInvalidRule, r.Name)
	}
	if r.Cost == 0 {
		r.Cost = 1
	}
	if r.Cost < 1 || r.Cost > r.Limit.Max() {
		return r, fmt.Errorf("%w: rule %q: cost %d is not in 1..%d, so no request could pass", ErrInvalidRule, r.Name, r.Cost, r.Limit.Max())
	}
	return r, nil
}

// validName checks a rule name: it goes into limiter keys, structured-field
// strings and gRPC metadata as it is.
func validName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: name %q is not 1..%d bytes long", ErrInvalidRule, name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlpha(c) && !isDigit(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%w: name %q holds %q: use letters, digits, '.', '_' and '-'", ErrInvalidRule, name, c)
		}
	}
	return nil
}

// validateRules checks rules as New does and returns a copy with defaults.
func validateRules(rules []Rule) ([]Rule, error) {
	if len(rules) == 0 {
		return nil, ErrNoRules
	}
	out := make([]Rule, len(rules))
	seen := make(map[string]bool, len(rules))
	enforced, shadow := 0, 0
	for i, r := range rules {
		r, err := r.validate()
		if err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%w: two rules are named %q", ErrInvalidRule, r.Name)
		}
		seen[r.Name] = true
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
