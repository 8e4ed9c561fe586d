package httplimit

import (
	"fmt"
	"net/http"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
)

// A Rule is one limit that the requests a middleware handles answer to.
type Rule struct {
	// Name identifies the rule: in limiter keys, in the RateLimit and
	// RateLimit-Policy fields, in problem bodies and in logs. 1 to 64
	// ASCII letters, digits, '.', '_' and '-'; unique in a middleware.
	//
	// The limiter key of a request is Name, ':' and the key from Key. So
	// rules with different names never share state. Rules with the same
	// name and limit in different middlewares (on different routes) do.
	Name string
	// Pattern, if not empty, limits the rule to the requests that an
	// [http.ServeMux] holding the middleware's patterns routes to it, such
	// as "POST /v1/chat/{id}". See "Routes" in the package documentation.
	Pattern string
	// Limit is how much the key may do. Leave it zero when LimitFunc is
	// set.
	Limit redlimit.Limit
	// LimitFunc, if not nil, chooses the limit of each request, such as
	// the limit of its tenant's plan. An error, a panic or an invalid limit refuses
	// the request through [Options].OnError, by default with 400; an error
	// wrapping [ErrNoKey] skips the rule. It must be safe for concurrent
	// use.
	LimitFunc func(*http.Request) (redlimit.Limit, error)
	// Key returns the key a request counts under; see [KeyFunc].
	Key KeyFunc
	// Cost is what one request costs; 0 means 1. It must not exceed
	// Limit.Max(), or, with LimitFunc, [redlimit.MaxCost]. Leave it zero
	// when CostFunc is set.
	Cost int64
	// CostFunc, if not nil, chooses the cost of each request, such as its
	// size or the tokens it will use. An error, a panic or a cost outside
	// 1..[redlimit.MaxCost] refuses the request as LimitFunc's error does.
	// A cost above the limit's Max is denied, with no Retry-After: it
	// never passes. It must be safe for concurrent use.
	CostFunc func(*http.Request) (int64, error)
	// Shadow runs the rule as a dry run: it decides, counts and logs what
	// it would deny, but never denies and sets no header field. It counts
	// the requests as if it alone were added to the enforced rules (see the
	// package documentation). It never makes them consume or refuse
	// anything.
	Shadow bool
	// Delay, if positive, makes the rule delay a request it would deny,
	// by up to Delay, instead of refusing it: NGINX's delay. A request
	// that would wait longer is refused at once (429). A token bucket's
	// requests take their places in line ([redlimit.Wait]): a Delay of k
	// emission intervals (Period/Count) delays up to k requests beyond
	// the burst. A delayed rule is decided alone, before the others; what
	// it admitted stays counted if another rule then denies (the strict
	// side). At most [redlimit.MaxWait]; not with Shadow or InFlight.
	Delay time.Duration
	// InFlight, if not zero, makes the rule an in-flight rule. Each
	// request it applies to holds a slot of InFlight on its key while the
	// handler runs. The slot is renewed if it runs past the TTL, and
	// released when it returns. A request that finds every slot held is denied (429), after
	// the rate rules allowed it. Such a rule has only a Name, a Pattern
	// and a Key; the middleware's limiter must be a [redlimit.Semaphore].
	InFlight redlimit.Concurrency
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
		rs[i] = ruleset.Rule[*http.Request]{Name: r.Name, Route: r.Pattern,
			Limit: r.Limit, LimitFunc: r.LimitFunc, Key: r.Key, Cost: r.Cost, CostFunc: r.CostFunc, Shadow: r.Shadow, Delay: r.Delay, InFlight: r.InFlight}
	}
	return ruleset.New(kind, rs)
}

// A routes finds which of the rules' patterns a request matches, as an
// [http.ServeMux] holding them would route it.
type routes struct {
	mux *http.ServeMux // nil when no rule has a pattern
}

// routeHandler marks a request the mux routes to one of the patterns.
type routeHandler string

func (routeHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// newRoutes registers the rules' patterns on a mux. It reports an error
// wrapping [ErrInvalidRule] for a pattern the mux refuses: malformed, or
// in conflict with another.
func newRoutes(rules []Rule) (routes, error) {
	var rt routes
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Pattern == "" || seen[r.Pattern] {
			continue
		}
		seen[r.Pattern] = true
		if rt.mux == nil {
			rt.mux = http.NewServeMux()
		}
		if err := register(rt.mux, r.Pattern); err != nil {
			return routes{}, fmt.Errorf("%w: rule %q: %w", ErrInvalidRule, r.Name, err)
		}
	}
	return rt, nil
}

// register adds pattern to mux, which panics on a bad pattern.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pattern %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, routeHandler(pattern))
	return nil
}

// match returns the pattern r matches, or "" if none: a request the mux
// would redirect or refuse matches none.
func (rt routes) match(r *http.Request) string {
	if rt.mux == nil {
		return ""
	}
	h, _ := rt.mux.Handler(r)
	p, _ := h.(routeHandler)
	return string(p)
}
