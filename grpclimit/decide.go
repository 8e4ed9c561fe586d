package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// This file follows httplimit's decide.go: enforced rules in one AllowAll,
// then shadow rules, each counted as if it alone were added.

func isNoKey(err error) bool { return errors.Is(err, ErrNoKey) }

// applied is a rule that applies to one call, with its limiter key.
type applied struct {
	rule *Rule
	key  string
}

// outcome is what the rules decided for one call.
type outcome struct {
	allowed    bool
	retryAfter time.Duration
	results    []redlimit.Result
	decided    []bool
}

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
	if len(shadow) == 0 {
		return out, nil
	}
	attrs = slices.Clip(attrs)
	d, err := allowAll(ctx, lim, rules, shadow)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "grpclimit: shadow rules not decided", append(attrs, slog.Any("err", err))...)
		return out, nil
	}
	for j, i := range shadow {
		a, res := rules[i], d.Results[j]
		if !d.Allowed && res.Allowed {
			// The joint denial of the others kept this one from counting.
			res2, err := lim.AllowN(ctx, a.key, a.rule.Limit, a.rule.Cost)
			if err != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "grpclimit: shadow rule not decided", append(attrs, slog.String("rule", a.rule.Name), slog.Any("err", err))...)
				continue
			}
			res = res2
		}
		out.results[i], out.decided[i] = res, true
		if !res.Allowed {
			log.LogAttrs(ctx, slog.LevelInfo, "grpclimit: shadow rule would deny", append(attrs,
				slog.String("rule", a.rule.Name),
				slog.String("limit", a.rule.Limit.String()),
				slog.String("key", a.key),
				slog.Duration("retry_after", res.RetryAfter))...)
		}
	}
	return out, nil
}

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
		return d, fmt.Errorf("grpclimit: %w: %d results for %d requests", redlimit.ErrBadReply, len(d.Results), len(reqs))
	}
	return d, nil
}

// tightest returns the index of the decided result closest to running out,
// or -1.
func (o *outcome) tightest() int {
	var idx []int
	var results []redlimit.Result
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
