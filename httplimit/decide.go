package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// applied is a rule that applies to one request, with its limiter key.
type applied struct {
	rule *Rule
	key  string // the limiter key: rule name, ':', the KeyFunc's key
}

// outcome is what the rules decided for one request.
type outcome struct {
	// allowed reports whether every enforced rule allowed the request.
	allowed bool
	// retryAfter is the enforced decision's RetryAfter.
	retryAfter time.Duration
	// results holds a result for each applied rule that was decided, and
	// decided says which: shadow rules are not decided when the enforced
	// ones deny.
	results []redlimit.Result
	decided []bool
}

// decide decides the applied rules: the enforced ones together in one
// AllowAll, then, if they allow, the shadow ones (see decideShadow). An
// error means the enforced decision could not be made.
func decide(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, rules []applied, attrs []slog.Attr) (outcome, error) {
	out := outcome{allowed: true, results: make([]redlimit.Result, len(rules)), decided: make([]bool, len(rules))}
	var enforced, shadow []int
	for i, a := range rules {
		if a.rule.Shadow {
			shadow = append(shadow, i)
		} else {
			enforced = append(enforced, i)
		}
	}
	if len(enforced) > 0 {
		d, err := allowAll(ctx, lim, rules, enforced)
		if err != nil {
			return out, err
		}
		for j, i := range enforced {
			out.results[i], out.decided[i] = d.Results[j], true
		}
		out.allowed, out.retryAfter = d.Allowed, d.RetryAfter()
		if !d.Allowed {
			return out, nil
		}
	}
	if len(shadow) > 0 {
		decideShadow(ctx, lim, log, rules, shadow, &out, attrs)
	}
	return out, nil
}

// decideShadow decides the shadow rules of a request the enforced rules
// allowed. Each shadow rule must count as if it alone were enforced: so they
// are decided together in one AllowAll (one round trip when all allow), and
// if that denies, which consumes none of them, each one that would have
// allowed on its own is decided again alone. Errors are logged, never
// returned: a shadow rule never changes what happens to the request.
func decideShadow(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, rules []applied, shadow []int, out *outcome, attrs []slog.Attr) {
	attrs = slices.Clip(attrs) // each append below makes its own copy
	d, err := allowAll(ctx, lim, rules, shadow)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "httplimit: shadow rules not decided", append(attrs, slog.Any("err", err))...)
		return
	}
	for j, i := range shadow {
		res := d.Results[j]
		if !d.Allowed && res.Allowed {
			a := rules[i]
			res2, err := lim.AllowN(ctx, a.key, a.rule.Limit, a.rule.Cost)
			if err != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "httplimit: shadow rule not decided", append(attrs, slog.String("rule", a.rule.Name), slog.Any("err", err))...)
				continue
			}
			res = res2
		}
		out.results[i], out.decided[i] = res, true
		if !res.Allowed {
			a := rules[i]
			log.LogAttrs(ctx, slog.LevelInfo, "httplimit: shadow rule would deny", append(attrs,
				slog.String("rule", a.rule.Name),
				slog.String("limit", a.rule.Limit.String()),
				slog.String("key", a.key),
				slog.Duration("retry_after", res.RetryAfter))...)
		}
	}
}

// allowAll decides the rules at the given indices as one, and checks that the
// limiter answered one result per request.
func allowAll(ctx context.Context, lim redlimit.Limiter, rules []applied, idx []int) (redlimit.Decision, error) {
	reqs := make([]redlimit.Request, len(idx))
	for j, i := range idx {
		reqs[j] = redlimit.Request{Key: rules[i].key, Limit: rules[i].rule.Limit, Cost: rules[i].rule.Cost}
	}
	d, err := lim.AllowAll(ctx, reqs)
	if err != nil {
		return d, err
	}
	if len(d.Results) != len(reqs) {
		return d, fmt.Errorf("httplimit: %w: %d results for %d requests", redlimit.ErrBadReply, len(d.Results), len(reqs))
	}
	return d, nil
}

// tightest returns the index of the decided result closest to running out,
// as [redlimit.Decision.Tightest] chooses, or -1 if none was decided.
func (o *outcome) tightest() int {
	idx := make([]int, 0, len(o.results))
	results := make([]redlimit.Result, 0, len(o.results))
	for i, ok := range o.decided {
		if ok {
			idx = append(idx, i)
			results = append(results, o.results[i])
		}
	}
	t := redlimit.Decision{Results: results}.Tightest()
	if t < 0 {
		return -1
	}
	return idx[t]
}
