package rls

import (
	"context"
	"fmt"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/shadow"
)

// answer answers req; see [Service.Decide]. It plans the request, decides
// the plan and writes the response.
func (s *Service) answer(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, ErrNoConfig
	}
	if err := s.validate(req); err != nil {
		return nil, err
	}
	resp, parts := newResponse(len(req.Descriptors))
	if _, known := cfg.Domains[req.Domain]; !known {
		s.setMetadata(req, nil, resp)
		return resp, nil // an unknown domain: no limit, as envoyproxy/ratelimit answers
	}
	p, err := s.newPlan(cfg, req, parts)
	if err != nil {
		return nil, err
	}
	if len(p.items) > 0 {
		if err := s.decide(ctx, p); err != nil {
			return nil, err
		}
		s.respond(req, p, resp)
	}
	s.setMetadata(req, p, resp)
	return resp, nil
}

// decide decides p: each item's result, and the request's answer
// (p.denied, p.quotaDenied). It is the one place a request is answered.
//
//  1. Items that consume nothing are decided first. A deny-all rule
//     (requests_per_unit 0) is denied without asking the limiter. A
//     check (hits_addend 0) is peeked.
//  2. If an enforced one denied, or every quota is among them and spent,
//     the request is denied. Its debits are counted all the same: they
//     record work already done. Its other limits are peeked.
//  3. Otherwise the consuming limits are decided as package shadow says.
//     Each shadow limit and each quota counts as if it alone were added
//     to the enforced ones. An enforced denial denies the request, and
//     so does every quota spent.
//
// A quota with room in step 1 satisfies the request's quotas, and so does
// a descriptor without a limit under Options.QuotaMode. The consuming
// quotas then count as shadow limits.
func (s *Service) decide(ctx context.Context, p *plan) error {
	enforcedDenied, quotaRoom := false, p.quotaFree
	anyQuota, quotaCounted := false, false // a quota at all; one in step 3
	for i := range p.items {
		it := &p.items[i]
		anyQuota = anyQuota || it.quota
		switch {
		case it.denyAll:
			it.res = denyAllResult(it.limit, s.opts.Clock())
		case it.cost == 0:
			var err error
			if it.res, err = s.checkItem(ctx, it); err != nil {
				return err
			}
		default:
			quotaCounted = quotaCounted || it.quota
			continue
		}
		switch {
		case it.quota && it.res.Allowed:
			quotaRoom = true
		case it.res.Denied() && !it.shadow && !it.quota:
			enforcedDenied = true
		}
	}
	p.quotaDenied = anyQuota && !quotaRoom && !quotaCounted && !enforcedDenied
	p.denied = enforcedDenied || p.quotaDenied

	var results []redlimit.Result
	var err error
	switch {
	case len(p.reqs) == 0:
	case p.denied:
		results, err = s.peekDenied(ctx, p)
	default:
		if quotaRoom {
			for j, r := range p.roles {
				if r == shadow.Quota {
					p.roles[j] = shadow.Shadow
				}
			}
		}
		var d shadow.Decision
		d, err = shadow.Decide(ctx, observed{s}, p.reqs, p.roles)
		results, p.denied, p.quotaDenied = d.Results, !d.Allowed, d.QuotaDenied
	}
	if err != nil {
		return err
	}
	for i := range p.items {
		if it := &p.items[i]; it.req >= 0 {
			it.res = results[it.req]
			if it.ruleReq >= 0 {
				it.res = both(it.res, results[it.ruleReq])
			}
		}
	}
	return nil
}

// checkItem answers it, a check (hits_addend 0), with its rule's own
// limit under no-raise if it has one.
func (s *Service) checkItem(ctx context.Context, it *item) (redlimit.Result, error) {
	res, err := s.check(ctx, it.key, it.limit)
	if err != nil || it.ruleKey == "" {
		return res, err
	}
	rule, err := s.check(ctx, it.ruleKey, it.ruleLimit)
	if err != nil {
		return redlimit.Result{}, err
	}
	return both(res, rule), nil
}

// both returns the result of an override o decided together with its
// rule's own limit r: denied if either denies, with what both leave. It
// keeps o's Limit, the limit the descriptor's status shows.
func both(o, r redlimit.Result) redlimit.Result {
	res := o
	if redlimit.Tightest([]redlimit.Result{o, r}) == 1 {
		res = r
		res.Max = o.Max
	}
	res.Remaining = min(o.Remaining, r.Remaining)
	res.ResetAfter = max(o.ResetAfter, r.ResetAfter)
	return res
}

// peekDenied returns the results of p's limits, a request denied before
// they were counted. Its debits are counted, in one AllowAll of the
// debits alone; its other limits are peeked.
func (s *Service) peekDenied(ctx context.Context, p *plan) ([]redlimit.Result, error) {
	results := make([]redlimit.Result, len(p.reqs))
	var debits []redlimit.Request
	var at []int
	for j, r := range p.reqs {
		if r.Debit {
			debits, at = append(debits, r), append(at, j)
		}
	}
	if len(debits) > 0 {
		d, err := observed{s}.AllowAll(ctx, debits)
		if err != nil {
			return nil, err
		}
		if len(d.Results) != len(debits) {
			return nil, fmt.Errorf("rls: %w: %d results for %d debits", redlimit.ErrBadReply, len(d.Results), len(debits))
		}
		for k, j := range at {
			results[j] = d.Results[k]
		}
	}
	for j, r := range p.reqs {
		if r.Debit {
			continue
		}
		res, err := s.peek(ctx, r)
		if err != nil {
			return nil, err
		}
		results[j] = res
	}
	return results, nil
}

// denyAllResult is the answer to a rule with requests_per_unit 0: denied,
// nothing left, never allowed (so no Retry-After), and
// duration_until_reset one unit. A calendar's is the time to its period's
// end after now. The limiter is not asked, so it counts nothing; its
// Source is the store's, the configuration's stand-in.
func denyAllResult(l redlimit.Limit, now time.Time) redlimit.Result {
	reset := l.Period
	if !l.Calendar.IsZero() {
		_, end := l.Calendar.Window(now)
		reset = end.Sub(now)
	}
	return redlimit.Result{RetryAfter: redlimit.Never, ResetAfter: reset, Source: redlimit.FromStore}
}

// observed is the service's limiter, each AllowAll reported to its observer.
type observed struct{ s *Service }

func (o observed) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	start := time.Now()
	d, err := o.s.opts.Limiter.AllowAll(ctx, reqs)
	o.s.opts.Observer.Backend(time.Since(start), sourceOf(d.Results), err)
	return d, err
}

// peek asks the limiter what r would get, without consuming anything, and
// reports the call.
func (s *Service) peek(ctx context.Context, r redlimit.Request) (redlimit.Result, error) {
	start := time.Now()
	res, err := s.opts.Limiter.Peek(ctx, r.Key, r.Limit, r.Cost)
	s.opts.Observer.Backend(time.Since(start), res.Source, err)
	return res, err
}

// check answers a check (hits_addend 0) of key under limit. It passes
// if a hit of 1 would, and reports the key as it is, not after that hit.
// A hit above the limit is denied whatever the key holds. A denial
// describes the key without its hit. So a second peek, of limit.Max()+1,
// reads what is left and when it is whole. A fixed window needs none. One
// hit less is one more left. Its reset is its window's end, which
// envoyproxy/ratelimit reports for every key, fresh ones too. Nor does a
// limit of redlimit.MaxCost, which has no larger hit. It shows one more
// left, and the reset after the hit.
func (s *Service) check(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	res, err := s.peek(ctx, redlimit.Request{Key: key, Limit: limit, Cost: 1})
	if err != nil || !res.Allowed || res.Source == redlimit.FromFailOpen {
		return res, err
	}
	if limit.Algorithm == redlimit.FixedWindow || limit.Max() >= redlimit.MaxCost {
		res.Remaining++
		return res, nil
	}
	now, err := s.peek(ctx, redlimit.Request{Key: key, Limit: limit, Cost: limit.Max() + 1})
	if err != nil {
		return redlimit.Result{}, err
	}
	if !now.Allowed && now.Source == res.Source {
		res.Remaining, res.ResetAfter = now.Remaining, now.ResetAfter
	}
	return res, nil
}

// sourceOf returns the first source among results that is not the store.
func sourceOf(results []redlimit.Result) redlimit.Source {
	for _, r := range results {
		if r.Source != redlimit.FromStore {
			return r.Source
		}
	}
	return redlimit.FromStore
}
