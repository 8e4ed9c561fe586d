package httplimit

import (
	"net/http"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
)

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
	// Shadow runs the rule as a dry run: it decides, counts and logs what
	// it would deny, but never denies and sets no header field. It counts
	// the requests as if it alone were added to the enforced rules (see the
	// package documentation), and never makes them consume or refuse
	// anything.
	Shadow bool
}

// kind makes the rule engine's errors and messages those of httplimit.
var kind = &ruleset.Kind{
	Pkg:            "httplimit",
	Unit:           "request",
	ErrNoRules:     ErrNoRules,
	ErrInvalidRule: ErrInvalidRule,
}

// newRuleSet checks rules as New does and returns them as a rule set, with
// defaults filled in.
func newRuleSet(rules []Rule) (*ruleset.Set[*http.Request], error) {
	rs := make([]ruleset.Rule[*http.Request], len(rules))
	for i, r := range rules {
		rs[i] = ruleset.Rule[*http.Request]{Name: r.Name, Limit: r.Limit, Key: r.Key, Cost: r.Cost, Shadow: r.Shadow}
	}
	return ruleset.New(kind, rs)
}
