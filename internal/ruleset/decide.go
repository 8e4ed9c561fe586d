package ruleset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// Applied is a rule that applies to one request, with its limiter key.
type Applied[R any] struct {
	Rule  *Rule[R]
	Index int    // the rule's position in its set
	Key   string // the limiter key: rule name, ':', the key function's key
}

// Outcome is what the rules decided for one request.
type Outcome[R any] struct {
	// Applied are the rules decided, as given to Decide.
	Applied []Applied[R]
	// Allowed reports whether every enforced rule allowed the request.
	Allowed bool
	// RetryAfter is the enforced decision's RetryAfter.
	RetryAfter time.Duration
	// Results holds a result for each applied rule that was decided, and
	// Decided says which: shadow rules are not decided when the enforced
	// ones deny.
	Results []redlimit.Result
	Decided []bool
}

// Decide decides the applied rules with lim: the enforced ones together in
// one AllowAll, then, if they allow, the shadow ones (see decideShadow),
// logging to log with attrs. An error means the enforced decision could not
// be made.
func (s *Set[R]) Decide(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, applied []Applied[R], attrs []slog.Attr) (Outcome[R], error) {
	out := Outcome[R]{Applied: applied, Allowed: true, Results: make([]redlimit.Result, len(applied)), Decided: make([]bool, len(applied))}
	var enforced, shadow []int
	for i, a := range applied {
		if a.Rule.Shadow {
			shadow = append(shadow, i)
		} else {
			enforced = append(enforced, i)
		}
	}
	if len(enforced) > 0 {
		d, err := s.allowAll(ctx, lim, applied, enforced)
		if err != nil {
			return out, err
		}
		for j, i := range enforced {
			out.Results[i], out.Decided[i] = d.Results[j], true
		}
		out.Allowed, out.RetryAfter = d.Allowed, d.RetryAfter()
		if !d.Allowed {
			return out, nil
		}
	}
	if len(shadow) > 0 {
		s.decideShadow(ctx, lim, log, shadow, &out, attrs)
	}
	return out, nil
}

// decideShadow decides the shadow rules of a request the enforced rules
// allowed. Each shadow rule must count as if it alone were enforced: so they
// are decided together in one AllowAll (one round trip when all allow), and
// if that denies, which consumes none of them, each one that would have
// allowed on its own is decided again alone. Errors are logged, never
// returned: a shadow rule never changes what happens to the request.
func (s *Set[R]) decideShadow(ctx context.Context, lim redlimit.Limiter, log *slog.Logger, shadow []int, out *Outcome[R], attrs []slog.Attr) {
	pkg := s.kind.Pkg
	attrs = slices.Clip(attrs) // each append below makes its own copy
	d, err := s.allowAll(ctx, lim, out.Applied, shadow)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, pkg+": shadow rules not decided", append(attrs, slog.Any("err", err))...)
		return
	}
	for j, i := range shadow {
		a, res := out.Applied[i], d.Results[j]
		if !d.Allowed && res.Allowed {
			// The joint denial of the others kept this one from counting.
			res2, err := lim.AllowN(ctx, a.Key, a.Rule.Limit, a.Rule.Cost)
			if err != nil {
				log.LogAttrs(ctx, slog.LevelWarn, pkg+": shadow rule not decided", append(attrs, slog.String("rule", a.Rule.Name), slog.Any("err", err))...)
				continue
			}
			res = res2
		}
		out.Results[i], out.Decided[i] = res, true
		if !res.Allowed {
			log.LogAttrs(ctx, slog.LevelInfo, pkg+": shadow rule would deny", append(attrs,
				slog.String("rule", a.Rule.Name),
				slog.String("limit", a.Rule.Limit.String()),
				slog.String("key", a.Key),
				slog.Duration("retry_after", res.RetryAfter))...)
		}
	}
}

// allowAll decides the applied rules at the given indices as one, and checks
// that the limiter answered one result per request.
func (s *Set[R]) allowAll(ctx context.Context, lim redlimit.Limiter, applied []Applied[R], idx []int) (redlimit.Decision, error) {
	reqs := make([]redlimit.Request, len(idx))
	for j, i := range idx {
		a := applied[i]
		reqs[j] = redlimit.Request{Key: a.Key, Limit: a.Rule.Limit, Cost: a.Rule.Cost}
	}
	d, err := lim.AllowAll(ctx, reqs)
	if err != nil {
		return d, err
	}
	if len(d.Results) != len(reqs) {
		return d, fmt.Errorf("%s: %w: %d results for %d requests", s.kind.Pkg, redlimit.ErrBadReply, len(d.Results), len(reqs))
	}
	return d, nil
}

// Tightest returns the index of the decided result closest to running out,
// as [redlimit.Decision.Tightest] chooses, or -1 if none was decided.
func (o *Outcome[R]) Tightest() int {
	idx := make([]int, 0, len(o.Results))
	results := make([]redlimit.Result, 0, len(o.Results))
	for i, ok := range o.Decided {
		if ok {
			idx = append(idx, i)
			results = append(results, o.Results[i])
		}
	}
	t := redlimit.Decision{Results: results}.Tightest()
	if t < 0 {
		return -1
	}
	return idx[t]
}

// Denied returns the indices of the enforced rules that denied, in order,
// and that of the one among them with the longest RetryAfter (the first of
// equals), or -1 if none did.
func (o *Outcome[R]) Denied() (denied []int, worst int) {
	worst = -1
	for i, a := range o.Applied {
		if a.Rule.Shadow || !o.Decided[i] || o.Results[i].Allowed {
			continue
		}
		denied = append(denied, i)
		if worst < 0 || o.Results[i].RetryAfter > o.Results[worst].RetryAfter {
			worst = i
		}
	}
	return denied, worst
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RetryAfterSeconds returns the Retry-After value for a wait of d: whole
// seconds rounded up, at least 1, so that a client never retries at once.
func RetryAfterSeconds(d time.Duration) int64 { return max(1, CeilSeconds(d)) }
