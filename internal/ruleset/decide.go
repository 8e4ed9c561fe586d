package ruleset

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/shadow"
)

// Applied is a rule that applies to one request, with its limiter key, limit
// and cost for that request.
type Applied[R any] struct {
	Rule  *Rule[R]
	Index int            // the rule's position in its set
	Key   string         // the limiter key: rule name, ':', the key function's key
	Limit redlimit.Limit // the rule's Limit, or what its LimitFunc chose
	Cost  int64          // the rule's Cost, or what its CostFunc chose
}

// A Verdict is what the rules decided for one request.
type Verdict[R any] struct {
	// Applied are the rules decided: those given to Decide, the delayed
	// ones first.
	Applied []Applied[R]
	// Allowed reports whether every enforced rule allowed the request.
	Allowed bool
	// RetryAfter is how long until the request could pass, as the enforced
	// rules that denied it say; 0 when Allowed.
	RetryAfter time.Duration
	// Results holds each applied rule's answer, in order; nil when only
	// shadow rules applied and the limiter failed.
	Results []redlimit.Result
}

// Decide decides the applied rules with lim: each delayed rule alone, in
// order, waiting its turn ([redlimit.Wait]); then, if every delayed rule
// admitted the request, the others together. What a delayed rule admitted
// stays counted if another rule then denies (the strict side). Shadow
// rules are decided as package shadow says; each that would deny is logged
// to log, with attrs. An error means the enforced rules could not be
// decided; when only shadow rules apply, a failure is logged instead and
// the request allowed.
func (s *Set[R]) Decide(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, applied []Applied[R], attrs []slog.Attr) (Verdict[R], error) {
	var v Verdict[R]
	rest := applied[:0:0]
	for _, a := range applied {
		if a.Rule.Delay == 0 {
			rest = append(rest, a)
			continue
		}
		res, err := redlimit.Wait(ctx, lim, a.Key, a.Limit, a.Cost, a.Rule.Delay)
		if err != nil {
			return v, err
		}
		v.Applied, v.Results = append(v.Applied, a), append(v.Results, res)
		if !res.Allowed {
			v.RetryAfter = res.RetryAfter
			return v, nil
		}
	}
	v.Allowed = true
	if len(rest) == 0 {
		return v, nil
	}
	w, err := s.decide(ctx, lim, log, rest, attrs)
	if err != nil || v.Applied == nil {
		return w, err
	}
	if w.Results == nil {
		// Only shadow rules were left, and the limiter failed: logged.
		return v, nil
	}
	w.Applied, w.Results = append(v.Applied, w.Applied...), append(v.Results, w.Results...)
	return w, nil
}

// decide decides the applied rules, none delayed, in one batch.
func (s *Set[R]) decide(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, applied []Applied[R], attrs []slog.Attr) (Verdict[R], error) {
	reqs := make([]redlimit.Request, len(applied))
	roles := make([]shadow.Role, len(applied))
	onlyShadow := true
	for i, a := range applied {
		reqs[i] = redlimit.Request{Key: a.Key, Limit: a.Limit, Cost: a.Cost}
		if a.Rule.Shadow {
			roles[i] = shadow.Shadow
		}
		onlyShadow = onlyShadow && a.Rule.Shadow
	}
	attrs = slices.Clip(attrs) // each append below makes its own copy
	d, err := shadow.Decide(ctx, lim, reqs, roles)
	if err != nil {
		if !onlyShadow {
			return Verdict[R]{Applied: applied}, err
		}
		log.LogAttrs(ctx, slog.LevelWarn, s.kind.Pkg+": shadow rules not decided", append(attrs, slog.Any("err", err))...)
		return Verdict[R]{Applied: applied, Allowed: true}, nil
	}
	for i, a := range applied {
		if res := d.Results[i]; a.Rule.Shadow && res.Denied() {
			log.LogAttrs(ctx, slog.LevelInfo, s.kind.Pkg+": shadow rule would deny", append(attrs,
				slog.String("rule", a.Rule.Name),
				slog.String("limit", a.Limit.String()),
				slog.String("key", a.Key),
				slog.Duration("retry_after", res.RetryAfter))...)
		}
	}
	return Verdict[R]{Applied: applied, Allowed: d.Allowed, RetryAfter: d.RetryAfter, Results: d.Results}, nil
}

// Quotas returns the enforced rules of v as the rate-limit fields describe
// them, in order: each rule's name, limit and result. Shadow rules have no
// fields: they decide nothing for the client.
func (v *Verdict[R]) Quotas() []ratelimitfield.Quota {
	if v.Results == nil {
		return nil
	}
	q := make([]ratelimitfield.Quota, 0, len(v.Applied))
	for i, a := range v.Applied {
		if !a.Rule.Shadow {
			q = append(q, ratelimitfield.Quota{Name: a.Rule.Name, Limit: a.Limit, Result: v.Results[i]})
		}
	}
	return q
}

// Denied returns the indices of the enforced rules that denied, in order.
// It also returns the index of the one with the longest RetryAfter, the
// first of equals; -1 if none denied.
func (v *Verdict[R]) Denied() (denied []int, worst int) {
	worst = -1
	if v.Allowed {
		return nil, worst
	}
	for i, a := range v.Applied {
		if a.Rule.Shadow || !v.Results[i].Denied() {
			continue
		}
		denied = append(denied, i)
		if worst < 0 || v.Results[i].RetryAfter > v.Results[worst].RetryAfter {
			worst = i
		}
	}
	return denied, worst
}

// Ended returns the error of ctx if it has ended or reached its deadline,
// or nil. A client library may give up at the deadline a moment before
// ctx's own timer marks it done. A request whose limiter call failed
// because its own caller left is refused. It is not served as a limiter
// failure.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
