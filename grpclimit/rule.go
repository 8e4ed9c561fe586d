package grpclimit

import (
	"context"
	"errors"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
)

// ErrNoKey is returned, wrapped, by a [KeyFunc] when its rule does not apply
// to a call: the rule is skipped for that call. It is httplimit.ErrNoKey
// too, so either can be returned.
var ErrNoKey = ruleset.ErrNoKey

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
	// Limit is how much the key may do. Leave it zero when LimitFunc is
	// set.
	Limit redlimit.Limit
	// LimitFunc, if not nil, chooses the limit of each call, such as the
	// limit of its tenant's plan. req is the request message of a unary
	// call, nil for a stream. An error, a panic or an invalid limit
	// refuses the call with codes.InvalidArgument; an error wrapping [ErrNoKey] skips
	// the rule. It must be safe for concurrent use.
	LimitFunc func(ctx context.Context, fullMethod string, req any) (redlimit.Limit, error)
	// Key returns the key a call counts under; see [KeyFunc].
	Key KeyFunc
	// Cost is what one call (or one stream) costs; 0 means 1. It must not
	// exceed Limit.Max(), or, with LimitFunc, [redlimit.MaxCost]. Leave it
	// zero when CostFunc is set.
	Cost int64
	// CostFunc, if not nil, chooses the cost of each call, such as the
	// size of its request or the tokens it will use; req is as for
	// LimitFunc. An error, a panic or a cost outside 1..[redlimit.MaxCost] refuses
	// the call with codes.InvalidArgument; an error wrapping [ErrNoKey]
	// skips the rule. A cost above the limit's Max is denied, and never
	// passes. It must be safe for concurrent use.
	CostFunc func(ctx context.Context, fullMethod string, req any) (int64, error)
	// Shadow runs the rule as a dry run: it decides, counts and logs what
	// it would deny, but never denies and sends no metadata. It counts the
	// calls as if it alone were added to the enforced rules, as in
	// httplimit.
	Shadow bool
	// Delay, if positive, makes the rule delay a call (or a stream's start)
	// it would deny, by up to Delay, instead of refusing it.
	// httplimit's Rule.Delay does the same. The call waits before its
	// handler runs.
	// A call that would wait longer, or past its own deadline, fails at
	// once with codes.ResourceExhausted and a RetryInfo. A token bucket's
	// calls take their places in line ([redlimit.Wait]); a call cancelled
	// while it waits gives its place back. A delayed rule is decided
	// alone, before the others. At most [redlimit.MaxWait]; not with
	// Shadow or InFlight.
	Delay time.Duration
	// InFlight, if not zero, makes the rule an in-flight rule. Each call
	// (or stream) it applies to holds a slot of InFlight on its key while
	// the handler runs. The slot is renewed if it runs past the TTL, and
	// released when it returns. A call that finds every slot held fails with
	// codes.ResourceExhausted, after the rate rules allowed it. Such a rule
	// has only a Name and a Key; the interceptor's limiter must be a
	// [redlimit.Semaphore].
	InFlight redlimit.Concurrency
}

// kind makes the rule engine's errors and messages those of grpclimit.
var kind = &ruleset.Kind{
	Pkg:            "grpclimit",
	Unit:           "call",
	ErrNoRules:     ErrNoRules,
	ErrInvalidRule: ErrInvalidRule,
}

// newRuleSet checks rules as New does and returns them as a rule set, with
// defaults filled in.
func newRuleSet(rules []Rule) (*ruleset.Set[call], error) {
	rs := make([]ruleset.Rule[call], len(rules))
	for i, r := range rules {
		rs[i] = ruleset.Rule[call]{Name: r.Name, Limit: r.Limit, Key: r.Key.ofCall(), Cost: r.Cost, Shadow: r.Shadow, Delay: r.Delay, InFlight: r.InFlight}
		if f := r.LimitFunc; f != nil {
			rs[i].LimitFunc = func(c call) (redlimit.Limit, error) { return f(c.ctx, c.method, c.req) }
		}
		if f := r.CostFunc; f != nil {
			rs[i].CostFunc = func(c call) (int64, error) { return f(c.ctx, c.method, c.req) }
		}
	}
	return ruleset.New(kind, rs)
}
