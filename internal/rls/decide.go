package rls

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/config"
)

// item is one limited descriptor of a request.
type item struct {
	desc   int // index of the descriptor in the request
	limit  redlimit.Limit
	cost   int64 // 0: checked without consuming (hits_addend explicitly 0)
	shadow bool
	// current is the descriptor status's current_limit.
	current *pb.RateLimitResponse_RateLimit
	label   string // rule label for the metrics
	key     string // the descriptor's key in the store
	req     int    // index in plan.reqs; -1 when cost is 0 or denyAll
	res     redlimit.Result
	// denyAll: the rule's requests_per_unit is 0, so the item is denied
	// without asking the limiter.
	denyAll bool
}

// plan is what a request asks the limiter.
type plan struct {
	items []item
	// reqs are the consuming limits, one per distinct (key, algorithm,
	// period): two descriptors that would share state are one request
	// with the sum of their costs.
	reqs []redlimit.Request
	// shadow[j] reports whether every item of reqs[j] is in shadow mode.
	shadow []bool
	// size bounds len(reqs): the descriptors of the request.
	size int
}

// inlineDescriptors is how many descriptors a request may have for its
// response and plan to be made without an allocation per descriptor: most
// requests have one to a few.
const inlineDescriptors = 4

// response is a response with, for up to inlineDescriptors descriptors, its
// statuses and their current limits: one allocation instead of two per
// descriptor. The messages are only ever used through pointers.
type response struct {
	resp     pb.RateLimitResponse
	statuses [inlineDescriptors]*pb.RateLimitResponse_DescriptorStatus
	status   [inlineDescriptors]pb.RateLimitResponse_DescriptorStatus
	current  [inlineDescriptors]pb.RateLimitResponse_RateLimit
}

// newResponse returns an OK response with an OK status for each of n
// descriptors, and the current_limit messages to give them (nil for n above
// inlineDescriptors: allocate each).
func newResponse(n int) (*pb.RateLimitResponse, []pb.RateLimitResponse_RateLimit) {
	if n > inlineDescriptors {
		resp := &pb.RateLimitResponse{
			OverallCode: pb.RateLimitResponse_OK,
			Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, n),
		}
		for i := range resp.Statuses {
			resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		}
		return resp, nil
	}
	r := &response{}
	r.resp.OverallCode = pb.RateLimitResponse_OK
	r.resp.Statuses = r.statuses[:n:n]
	for i := range n {
		r.status[i].Code = pb.RateLimitResponse_OK
		r.statuses[i] = &r.status[i]
	}
	return &r.resp, r.current[:n:n]
}

// lowerUnits are the response's units by their names in lower case, as
// the configuration and limit overrides name them (see responseUnit).
var lowerUnits = func() map[string]pb.RateLimitResponse_RateLimit_Unit {
	m := make(map[string]pb.RateLimitResponse_RateLimit_Unit)
	for name, v := range pb.RateLimitResponse_RateLimit_Unit_value {
		m[strings.ToLower(name)] = pb.RateLimitResponse_RateLimit_Unit(v)
	}
	return m
}()

// maxRemaining is limit_remaining of an unlimited descriptor.
const maxRemaining = math.MaxUint32

// decide answers req; see [Service.Decide].
func (s *Service) decide(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, ErrNoConfig
	}
	if err := s.validate(req); err != nil {
		return nil, err
	}
	resp, current := newResponse(len(req.Descriptors))
	if _, known := cfg.Domains[req.Domain]; !known {
		return resp, nil // an unknown domain: no limit, as envoyproxy/ratelimit answers
	}
	// The items stay on decide's stack for a request of up to
	// inlineDescriptors descriptors. (They are kept out of p: p.reqs goes
	// to the limiter, and with it, for the escape analysis, whatever p
	// holds.)
	var buf [inlineDescriptors]item
	var p plan
	items, err := s.plan(&p, buf[:0], cfg, req, resp, current)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return resp, nil
	}
	if err := s.run(ctx, items, p.reqs, p.shadow); err != nil {
		return nil, err
	}
	s.respond(req, &plan{items: items, reqs: p.reqs, shadow: p.shadow}, resp)
	return resp, nil
}

// plan matches every descriptor of req to its limit, fills the statuses of
// the descriptors that have none (no match, unlimited, replaced, negative
// hits), puts in p the limits to decide, and returns the items, appended to
// items. current, when not nil, holds a current_limit message for each
// descriptor.
func (s *Service) plan(p *plan, items []item, cfg *config.Config, req *pb.RateLimitRequest, resp *pb.RateLimitResponse, current []pb.RateLimitResponse_RateLimit) ([]item, error) {
	n := len(req.Descriptors)
	var rulesBuf [inlineDescriptors]*config.Rule
	rules := rulesBuf[:0]
	if n > len(rulesBuf) {
		rules = make([]*config.Rule, n)
	}
	rules = rules[:n]
	replaced := map[string]bool(nil)
	entries := make([]config.Entry, 0, 8)
	for i, d := range req.Descriptors {
		if d.IsNegativeHits {
			// A refund: redlimit has none, so the budget stays consumed
			// (the strict side). Answered OK without a limit.
			continue
		}
		entries = entries[:0]
		for _, e := range d.Entries {
			entries = append(entries, config.Entry{Key: e.Key, Value: e.Value})
		}
		rules[i] = cfg.Match(req.Domain, entries)
		if r := rules[i]; r != nil && d.Limit == nil {
			for _, name := range r.Replaces {
				if replaced == nil {
					replaced = make(map[string]bool)
				}
				replaced[name] = true
			}
		}
	}

	if n > cap(items) {
		items = make([]item, 0, n)
	}
	p.size = n
	var keyBuf [256]byte
	key := keyBuf[:0]
	for i, d := range req.Descriptors {
		rule := rules[i]
		if d.IsNegativeHits || (rule == nil && d.Limit == nil) {
			continue
		}
		cost := hits(req, d)
		it := item{desc: i, cost: cost, req: -1}
		switch {
		case d.Limit != nil:
			// The descriptor's own limit replaces the rule's, as in
			// envoyproxy/ratelimit: never in shadow mode of its own, never
			// replaced, replacing nothing.
			if err := s.override(&it, req.Domain, d, rule, i); err != nil {
				return nil, err
			}
		case rule.Unlimited:
			resp.Statuses[i].LimitRemaining = maxRemaining
			s.opts.Observer.Descriptor(req.Domain, rule.Path, Unlimited, redlimit.FromStore, d.Entries)
			continue
		case rule.Name != "" && replaced[rule.Name]:
			continue
		default:
			it.limit = rule.Limit
			it.shadow = rule.Shadow
			it.denyAll = rule.DenyAll
			if current != nil {
				it.current = &current[i]
			} else {
				it.current = &pb.RateLimitResponse_RateLimit{}
			}
			it.current.Name = rule.Name
			it.current.RequestsPerUnit = clampUint32(rule.Limit.Count)
			it.current.Unit = responseUnit(rule.Unit)
			it.label = s.label(rule, req.Domain, d.Entries)
		}
		it.shadow = it.shadow || s.opts.Shadow
		key = descriptorKey(key[:0], req.Domain, d.Entries)
		it.key = string(key)
		if cost > 0 && !it.denyAll {
			p.add(&it)
		}
		items = append(items, it)
	}
	return items, nil
}

// add puts the limit of it into p.reqs, merged with an earlier request of
// the same state.
func (p *plan) add(it *item) {
	for j := range p.reqs {
		r := &p.reqs[j]
		if r.Key != it.key || r.Limit.Algorithm != it.limit.Algorithm || r.Limit.Period != it.limit.Period {
			continue
		}
		// The same descriptor twice (or a rule and an override of one
		// period): one state, so one request for the sum of the costs,
		// under the tighter of the limits.
		r.Cost = min(r.Cost+it.cost, redlimit.MaxCost)
		if it.limit.Max() < r.Limit.Max() {
			r.Limit = it.limit
		}
		p.shadow[j] = p.shadow[j] && it.shadow
		it.req = j
		return
	}
	if p.reqs == nil {
		// Sized once for the request rather than grown.
		p.reqs = make([]redlimit.Request, 0, p.size)
		p.shadow = make([]bool, 0, p.size)
	}
	it.req = len(p.reqs)
	p.reqs = append(p.reqs, redlimit.Request{Key: it.key, Limit: it.limit, Cost: it.cost})
	p.shadow = append(p.shadow, it.shadow)
}

// hits returns the cost of a descriptor: its own hits_addend if set (0 means
// check without consuming, as envoyproxy/ratelimit has it), else the
// request's (0 means 1). validate has checked it.
func hits(req *pb.RateLimitRequest, d *rlpb.RateLimitDescriptor) int64 {
	if d.HitsAddend != nil {
		return int64(d.HitsAddend.Value)
	}
	return int64(max(1, req.HitsAddend))
}

// override sets it to the limit the descriptor carries. It is counted by the
// matched rule's algorithm (with a token bucket's burst equal to the count)
// and failure policy, or by Options.DefaultAlgorithm when no limited rule
// matched.
func (s *Service) override(it *item, domain string, d *rlpb.RateLimitDescriptor, rule *config.Rule, i int) error {
	o := d.Limit
	name, period, err := overridePeriod(o, i)
	if err != nil {
		return err
	}
	lim := redlimit.Limit{Algorithm: s.opts.DefaultAlgorithm, Count: int64(o.RequestsPerUnit), Period: period}
	it.label = domain + ".limit_override"
	if rule != nil && !rule.Unlimited {
		lim.Algorithm, lim.Failure = rule.Limit.Algorithm, rule.Limit.Failure
		it.label = rule.Path
	}
	if lim.Algorithm == redlimit.TokenBucket {
		lim.Burst = lim.Count
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("%w: descriptor %d: limit override %d per %s, %s: %w", ErrInvalidRequest, i, o.RequestsPerUnit, period, lim.Algorithm, err)
	}
	it.limit = lim
	it.current = &pb.RateLimitResponse_RateLimit{
		RequestsPerUnit: o.RequestsPerUnit,
		Unit:            responseUnit(name),
		UnitMultiplier:  o.UnitMultiplier,
	}
	return nil
}

// run decides the limits of a plan (its items, reqs and shadow) and sets
// every item's result. (It takes the plan's fields rather than the plan, so
// that the items, which the limiter never sees, can stay on decide's stack.)
//
// Enforced and shadow limits go to the limiter together, in one AllowAll:
// when it allows, every limit consumed, in one round trip. When it denies,
// nothing was consumed; if an enforced limit denied, that is the answer. If
// only shadow limits denied, the request must pass all the same, so the
// enforced limits alone are decided again, in a second call. So a shadow
// limit never blocks what the enforced limits consume, and each shadow
// limit counts what it would count if the shadow limits were enforced: a
// request it (or another shadow limit) would deny is not counted.
//
// Descriptors with hits_addend 0 are peeked (a cost of 1, nothing
// consumed) before anything else; if an enforced one has nothing left, the
// request is denied and the other limits are peeked too. So is a request
// with an enforced deny-all rule (requests_per_unit 0), which is denied
// without asking the limiter.
func (s *Service) run(ctx context.Context, items []item, reqs []redlimit.Request, shadow []bool) error {
	checkDenied := false
	for i := range items {
		it := &items[i]
		if it.denyAll {
			it.res = denyAllResult(it.limit)
			checkDenied = checkDenied || !it.shadow
			continue
		}
		if it.cost != 0 {
			continue
		}
		res, err := s.peek(ctx, redlimit.Request{Key: it.key, Limit: it.limit, Cost: 1})
		if err != nil {
			return err
		}
		it.res = res
		if !res.Allowed && !it.shadow {
			checkDenied = true
		}
	}
	var results []redlimit.Result
	switch {
	case len(reqs) == 0:
	case checkDenied:
		results = make([]redlimit.Result, len(reqs))
		for j, r := range reqs {
			res, err := s.peek(ctx, r)
			if err != nil {
				return err
			}
			results[j] = res
		}
	default:
		d, err := s.allowAll(ctx, reqs)
		if err != nil {
			return err
		}
		results = d.Results // the limiter's to give: allowAll checked its length
		if !d.Allowed && !enforcedDenied(d.Results, shadow) {
			var sub []redlimit.Request
			var at []int
			for j, r := range reqs {
				if !shadow[j] {
					sub, at = append(sub, r), append(at, j)
				}
			}
			if len(sub) > 0 {
				d2, err := s.allowAll(ctx, sub)
				if err != nil {
					return err
				}
				for k, j := range at {
					results[j] = d2.Results[k]
				}
			}
		}
	}
	for i := range items {
		if it := &items[i]; it.req >= 0 {
			it.res = results[it.req]
		}
	}
	return nil
}

// denyAllResult is the answer to a rule with requests_per_unit 0: denied,
// nothing left, never allowed (so no Retry-After), and
// duration_until_reset one unit. The limiter is not asked, so it counts
// nothing; its Source is the store's, the configuration's stand-in.
func denyAllResult(l redlimit.Limit) redlimit.Result {
	return redlimit.Result{RetryAfter: redlimit.Never, ResetAfter: l.Period, Source: redlimit.FromStore}
}

// enforcedDenied reports whether a limit not in shadow mode denied.
func enforcedDenied(results []redlimit.Result, shadow []bool) bool {
	for j, r := range results {
		if !r.Allowed && !shadow[j] {
			return true
		}
	}
	return false
}

// allowAll asks the limiter to decide reqs, and reports the call.
func (s *Service) allowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	start := time.Now()
	d, err := s.opts.Limiter.AllowAll(ctx, reqs)
	if err == nil && len(d.Results) != len(reqs) {
		err = fmt.Errorf("rls: limiter answered %d results for %d limits: %w", len(d.Results), len(reqs), redlimit.ErrBadReply)
	}
	s.opts.Observer.Backend(time.Since(start), sourceOf(d.Results), err)
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

// sourceOf returns the first source among results that is not the store.
func sourceOf(results []redlimit.Result) redlimit.Source {
	for _, r := range results {
		if r.Source != redlimit.FromStore {
			return r.Source
		}
	}
	return redlimit.FromStore
}

// label returns the metrics label of rule for a descriptor with entries:
// the rule's path, or for a detailed_metric rule the domain and every
// key_value of the request, while fewer than MaxDetailedSeries such labels
// have been made.
func (s *Service) label(rule *config.Rule, domain string, entries []*rlpb.RateLimitDescriptor_Entry) string {
	if !rule.DetailedMetric || s.opts.MaxDetailedSeries < 0 {
		return rule.Path
	}
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		b.WriteByte('_')
		b.WriteString(e.Value)
	}
	l := b.String()
	if _, ok := s.detailed.Load(l); ok {
		return l
	}
	if s.detailedN.Add(1) > int64(s.opts.MaxDetailedSeries) {
		s.detailedN.Add(-1)
		return rule.Path
	}
	if _, loaded := s.detailed.LoadOrStore(l, struct{}{}); loaded {
		s.detailedN.Add(-1)
	}
	return l
}

func clampUint32(v int64) uint32 {
	if v < 0 {
		return 0
	}
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}
