// Package ruleset is the rule engine that httplimit and grpclimit share:
// named rules with a key function over the request type R, their validation,
// the keying of one request, its decision (enforced and shadow rules as
// package shadow decides them), the key function combinators
// [Compose], [Or] and [Hashed], [ErrNoKey] and the user in a context.
//
// R is *http.Request for httplimit and the context and method of a call for
// grpclimit. The errors and log messages are those of the package a [Kind]
// describes.
package ruleset

import (
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

// MaxNameLen bounds a rule's name.
const MaxNameLen = 64

// A Kind describes the package a rule set works for: the prefix of its
// messages, what its rules limit, and the sentinel errors its errors wrap.
type Kind struct {
	// Pkg begins every message: "httplimit", as in
	// "httplimit: shadow rule would deny".
	Pkg string
	// Unit is what one rule decision is about, "request" or "call".
	Unit string
	// ErrNoRules is returned for no rules.
	ErrNoRules error
	// ErrInvalidRule is wrapped by errors about a bad name, a missing key
	// function, a bad cost or too many rules.
	ErrInvalidRule error
}

// A Rule is one named limit, and the function that keys a request by it.
// The packages' exported Rule types convert to it field by field.
type Rule[R any] struct {
	// Name identifies the rule: 1 to MaxNameLen ASCII letters, digits,
	// '.', '_' and '-', unique in a set. It begins the rule's limiter keys.
	Name string
	// Limit is how much a key may do, unless LimitFunc is set.
	Limit redlimit.Limit
	// LimitFunc, if not nil, chooses the limit of each request instead.
	LimitFunc func(R) (redlimit.Limit, error)
	// Key returns the key a request counts under, or an error wrapping
	// [ErrNoKey] when the rule does not apply to it.
	Key func(R) (string, error)
	// Cost is what one request costs, 1..Limit.Max(); 0 means 1. It is
	// used unless CostFunc is set.
	Cost int64
	// CostFunc, if not nil, chooses the cost of each request instead.
	CostFunc func(R) (int64, error)
	// Route, if not empty, limits the rule to the requests whose route,
	// as the caller of Apply finds it, is Route.
	Route string
	// Shadow makes the rule a dry run: decided and counted as package
	// shadow says, never denying.
	Shadow bool
	// Delay, if positive, makes the rule delay a request it would deny,
	// by up to Delay, instead of denying it (see Decide). At most
	// [redlimit.MaxWait]; not with Shadow or InFlight.
	Delay time.Duration
	// InFlight, if not zero, makes the rule an in-flight rule: it holds a
	// slot of InFlight for the life of each request (inflight.go). Such a
	// rule has no Limit, Cost or functions of them, and no Shadow.
	InFlight redlimit.Concurrency
}

// A Set is a validated list of rules of one kind.
type Set[R any] struct {
	kind *Kind
	// Rules are the rate rules given to New, in order, with their
	// defaults filled in. They must not be changed.
	Rules []Rule[R]
	// Held are the in-flight rules given to New, in order.
	Held []Rule[R]
}

// New validates rules and returns them as a set. It reports an error
// wrapping k.ErrNoRules for no rules, k.ErrInvalidRule for a bad name,
// a duplicate name, a missing key function, a bad cost or more than
// [redlimit.MaxRequests] rules (enforced and shadow rules are decided in one
// AllowAll), and the redlimit sentinel errors for a bad limit.
func New[R any](k *Kind, rules []Rule[R]) (*Set[R], error) {
	if len(rules) == 0 {
		return nil, k.ErrNoRules
	}
	if len(rules) > redlimit.MaxRequests {
		return nil, fmt.Errorf("%w: %d rules, at most %d", k.ErrInvalidRule, len(rules), redlimit.MaxRequests)
	}
	s := &Set[R]{kind: k}
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		var err error
		if r.InFlight != (redlimit.Concurrency{}) {
			err = validateHeld(k, r)
			s.Held = append(s.Held, r)
		} else {
			r, err = validate(k, r)
			s.Rules = append(s.Rules, r)
		}
		if err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%w: two rules are named %q", k.ErrInvalidRule, r.Name)
		}
		seen[r.Name] = true
	}
	return s, nil
}

// validate checks r and returns it with its defaults filled in.
func validate[R any](k *Kind, r Rule[R]) (Rule[R], error) {
	if err := validName(k, r.Name); err != nil {
		return r, err
	}
	if r.Key == nil {
		return r, fmt.Errorf("%w: rule %q has no key function", k.ErrInvalidRule, r.Name)
	}
	if r.Delay < 0 || r.Delay > redlimit.MaxWait || (r.Delay > 0 && r.Shadow) {
		return r, fmt.Errorf("%w: rule %q: delay %s: %w", k.ErrInvalidRule, r.Name, r.Delay, redlimit.ErrInvalidWait)
	}
	if r.LimitFunc != nil {
		if r.Limit != (redlimit.Limit{}) {
			return r, fmt.Errorf("%w: rule %q has both a Limit and a LimitFunc", k.ErrInvalidRule, r.Name)
		}
	} else if err := r.Limit.Validate(); err != nil {
		return r, fmt.Errorf("%s: rule %q: %w", k.Pkg, r.Name, err)
	}
	if r.CostFunc != nil {
		if r.Cost != 0 {
			return r, fmt.Errorf("%w: rule %q has both a Cost and a CostFunc", k.ErrInvalidRule, r.Name)
		}
		return r, nil
	}
	if r.Cost == 0 {
		r.Cost = 1
	}
	if r.LimitFunc != nil {
		// The limit is known per request; a cost above it is denied then.
		if r.Cost < 1 || r.Cost > redlimit.MaxCost {
			return r, fmt.Errorf("%w: rule %q: cost %d is not in 1..%d", k.ErrInvalidRule, r.Name, r.Cost, int64(redlimit.MaxCost))
		}
		return r, nil
	}
	if r.Cost < 1 || r.Cost > r.Limit.Max() {
		return r, fmt.Errorf("%w: rule %q: cost %d is not in 1..%d, so no %s could pass", k.ErrInvalidRule, r.Name, r.Cost, r.Limit.Max(), k.Unit)
	}
	return r, nil
}

// validName checks a rule name: it goes into limiter keys, structured-field
// strings and gRPC metadata as it is.
func validName(k *Kind, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: name %q is not 1..%d bytes long", k.ErrInvalidRule, name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: name %q holds %q: use letters, digits, '.', '_' and '-'", k.ErrInvalidRule, name, c)
		}
	}
	return nil
}

// Apply keys req by every rule of s whose Route is empty or route, and
// returns those that apply to it, in order, each with its limiter key (the
// rule's name, ':' and the key), its limit and its cost. A rule whose key,
// limit or cost function returns an error wrapping [ErrNoKey] does not
// apply. Any other error, a panic, an empty key, a bad limit or a cost outside
// 1..[redlimit.MaxCost] stops Apply, which returns the rule and the error:
// the request cannot be decided. A shadow rule is a dry run, which never
// refuses a request: its error does not stop Apply, the rule does not
// apply, and shadowKeyErr (if not nil) is called with the rule and the
// error, to log it.
func (s *Set[R]) Apply(req R, route string, shadowKeyErr func(*Rule[R], error)) ([]Applied[R], *Rule[R], error) {
	applied := make([]Applied[R], 0, len(s.Rules))
	for i := range s.Rules {
		rule := &s.Rules[i]
		if rule.Route != "" && rule.Route != route {
			continue
		}
		a, err := rule.apply(req)
		if err != nil {
			if errors.Is(err, ErrNoKey) {
				continue
			}
			if rule.Shadow {
				if shadowKeyErr != nil {
					shadowKeyErr(rule, err)
				}
				continue
			}
			return nil, rule, err
		}
		a.Index = i
		applied = append(applied, a)
	}
	return applied, nil, nil
}

// Errors of a request's limit or cost, which Apply wraps.
var (
	errEmptyKey = errors.New("the key function returned an empty key")
	errLimit    = errors.New("the limit function failed")
	errCost     = errors.New("the cost function failed")
	errPanicked = errors.New("the function panicked")
)

// guard calls f with req, and returns its panic as an error: a rule's
// function that panics on one request fails that request alone. A gRPC
// server does not recover a panic; it would end the process.
func guard[R, T any](f func(R) (T, error), req R) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return f(req)
}

// apply keys req by r and chooses its limit and cost.
func (r *Rule[R]) apply(req R) (Applied[R], error) {
	a := Applied[R]{Rule: r, Limit: r.Limit, Cost: r.Cost}
	k, err := guard(r.Key, req)
	if err != nil {
		return a, err
	}
	if k == "" {
		return a, errEmptyKey
	}
	a.Key = r.Name + ":" + k
	if r.LimitFunc != nil {
		if a.Limit, err = guard(r.LimitFunc, req); err != nil {
			return a, fmt.Errorf("%w: %w", errLimit, err)
		}
		if err := a.Limit.Validate(); err != nil {
			return a, err
		}
	}
	if r.CostFunc != nil {
		if a.Cost, err = guard(r.CostFunc, req); err != nil {
			return a, fmt.Errorf("%w: %w", errCost, err)
		}
		if a.Cost < 1 || a.Cost > redlimit.MaxCost {
			return a, fmt.Errorf("%w: %d is not in 1..%d", redlimit.ErrInvalidCost, a.Cost, int64(redlimit.MaxCost))
		}
	}
	return a, nil
}
