package rls

import (
	"fmt"
	"math"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/shadow"
)

// item is one limited descriptor of a request.
type item struct {
	desc   int // index of the descriptor in the request
	limit  redlimit.Limit
	cost   int64 // 0: checked without consuming (hits_addend explicitly 0)
	debit  bool  // its hits are a debit, counted whatever the limit says
	shadow bool
	quota  bool // quota_mode, and not in shadow mode
	// current is the descriptor status's current_limit, in the plan's
	// parts.
	current *pb.RateLimitResponse_RateLimit
	// metadata is the rule's, returned when the descriptor passes.
	metadata *structpb.Struct
	label    string        // rule label for the metrics
	slot     *detailedSlot // the label's detailed_metric slot, to report it through; or nil
	key      string        // the descriptor's key in the store
	req      int           // index in plan.reqs; -1 when cost is 0 or denyAll
	// ruleKey and ruleLimit are, under OverridesNoRaise, the rule's own
	// limit decided together with an override of another state; ruleKey
	// is "" when there is none. ruleReq is its index in plan.reqs, or -1.
	ruleKey   string
	ruleLimit redlimit.Limit
	ruleReq   int
	res       redlimit.Result
	// denyAll: the rule's requests_per_unit is 0, so the item is denied
	// without asking the limiter.
	denyAll bool
}

// plan is what a request asks the limiter: its limited descriptors, and the
// limits they consume.
type plan struct {
	items []item
	// reqs are the consuming limits, one per state (redlimit.StateID): two
	// descriptors that would share state are one request for the sum of
	// their costs.
	reqs []redlimit.Request
	// roles[j] is what a denial of reqs[j] does: enforced if an item of
	// it is enforced, else a quota if one is a quota, else shadow.
	roles []shadow.Role
	// quotaFree: the request has room in its quotas whatever they say,
	// since with Options.QuotaMode a descriptor without a limit counts as
	// a quota with room, as in envoyproxy/ratelimit.
	quotaFree bool
	// denied and quotaDenied are the request's answer, set by decide:
	// denied, and denied because every quota was spent.
	denied, quotaDenied bool
	// parts are the response's statuses and what they point to, by
	// descriptor.
	parts []statusParts
}

// statusParts are a descriptor's status in the response, its current
// limit and its reset. They are allocated together, for all the
// descriptors of a response at once, not each apart (TestAnswerAllocs).
type statusParts struct {
	status pb.RateLimitResponse_DescriptorStatus
	limit  pb.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// newResponse returns an OK response to n descriptors, each status OK and
// parts[i].status.
func newResponse(n int) (*pb.RateLimitResponse, []statusParts) {
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, n),
	}
	parts := make([]statusParts, n)
	for i := range parts {
		parts[i].status.Code = pb.RateLimitResponse_OK
		resp.Statuses[i] = &parts[i].status
	}
	return resp, parts
}

// newPlanOf returns an empty plan with room for n descriptors. For up to
// three, the plan and its slices' arrays are allocated together
// (BenchmarkDecide, TestDecideAllocs).
func newPlanOf(n int) *plan {
	switch {
	case n <= 1:
		r := new(struct {
			p     plan
			items [1]item
			reqs  [1]redlimit.Request
			roles [1]shadow.Role
		})
		r.p.items, r.p.reqs, r.p.roles = r.items[:0], r.reqs[:0], r.roles[:0]
		return &r.p
	case n <= 3:
		r := new(struct {
			p     plan
			items [3]item
			reqs  [3]redlimit.Request
			roles [3]shadow.Role
		})
		r.p.items, r.p.reqs, r.p.roles = r.items[:0], r.reqs[:0], r.roles[:0]
		return &r.p
	}
	return &plan{items: make([]item, 0, n), reqs: make([]redlimit.Request, 0, n), roles: make([]shadow.Role, 0, n)}
}

// maxRemaining is limit_remaining of an unlimited descriptor.
const maxRemaining = math.MaxUint32

// newPlan matches every descriptor of req to its limit. It fills the
// statuses (parts, by descriptor) of the descriptors that have none: no
// match, unlimited, replaced, negative hits. It returns the plan of the
// others, and writes their current limits in parts.
func (s *Service) newPlan(cfg *config.Config, req *pb.RateLimitRequest, parts []statusParts) (*plan, error) {
	n := len(req.Descriptors)
	depth := 0
	for _, d := range req.Descriptors {
		depth += len(d.Entries)
	}
	// levels[ends[i-1]:ends[i]] are the descriptors descriptor i went
	// through, the last holding its rule. levels never grows, and is on the
	// stack for requests of up to 32 entries in all.
	var stack [32]*config.Descriptor
	levels := stack[:0]
	if depth > len(stack) {
		levels = make([]*config.Descriptor, 0, depth)
	}
	ends := make([]int32, n)
	replaced := map[string]bool(nil)
	entries := make([]config.Entry, 0, 8)
	for i, d := range req.Descriptors {
		if d.IsNegativeHits {
			// A refund: redlimit has none, so the budget stays consumed
			// (the strict side). Answered OK without a limit.
			ends[i] = int32(len(levels))
			continue
		}
		entries = entryList(entries, d)
		var r *config.Rule
		r, levels = cfg.MatchPath(req.Domain, entries, levels)
		ends[i] = int32(len(levels))
		if r != nil && d.Limit == nil {
			for _, name := range r.Replaces {
				if replaced == nil {
					replaced = make(map[string]bool)
				}
				replaced[name] = true
			}
		}
	}

	p := newPlanOf(n)
	p.parts = parts
	for i, d := range req.Descriptors {
		var rule *config.Rule
		start := int32(0)
		if i > 0 {
			start = ends[i-1]
		}
		path := levels[start:ends[i]]
		if len(path) > 0 {
			rule = path[len(path)-1].Rule
		}
		if d.IsNegativeHits || (rule == nil && d.Limit == nil) || (d.Limit == nil && !rule.Unlimited && rule.Name != "" && replaced[rule.Name]) {
			p.quotaFree = p.quotaFree || s.opts.QuotaMode
			continue
		}
		cost, debit := s.hitsOf(req, d, rule)
		it := item{desc: i, cost: cost, debit: debit, req: -1, ruleReq: -1, current: &parts[i].limit}
		switch {
		case d.Limit != nil:
			// The descriptor's own limit replaces the rule's, as in
			// envoyproxy/ratelimit: never in shadow mode of its own, never
			// replaced, replacing nothing, its own key, no metadata.
			if err := s.override(&it, req.Domain, d, rule, i); err != nil {
				return nil, err
			}
			it.key = descriptorKey(req.Domain, d.Entries, nil)
			s.keepRule(&it, rule, descriptorKey(req.Domain, d.Entries, path))
		case rule.Unlimited:
			parts[i].status.LimitRemaining = maxRemaining
			s.opts.Observer.Descriptor(req.Domain, rule.Path, Unlimited, redlimit.FromStore, d.Entries)
			continue
		default:
			it.limit = rule.Limit
			it.shadow = rule.Shadow
			it.quota = rule.QuotaMode
			it.denyAll = rule.DenyAll
			it.metadata = rule.Metadata
			it.current.Name = rule.Name
			it.current.RequestsPerUnit = clampUint32(rule.Limit.Count)
			it.current.Unit = responseUnit(rule.Unit)
			if rule.UnitMultiplier > 1 {
				it.current.UnitMultiplier = wrapperspb.UInt32(rule.UnitMultiplier)
			}
			entries = entryList(entries, d)
			it.label, it.slot = s.label(rule, entries, path)
			it.key = descriptorKey(req.Domain, d.Entries, path)
		}
		it.shadow = it.shadow || s.opts.Shadow
		it.quota = (it.quota || s.opts.QuotaMode) && !it.shadow
		if cost > 0 && !it.denyAll {
			it.req = p.add(&it, it.key, it.limit)
			if it.ruleKey != "" {
				it.ruleReq = p.add(&it, it.ruleKey, it.ruleLimit)
			}
		}
		if len(p.reqs) > redlimit.MaxRequests {
			return nil, fmt.Errorf("%w: descriptor %d: the request asks more than %d limits (under no-raise, an override counts against its rule's limit too)",
				ErrInvalidRequest, i, redlimit.MaxRequests)
		}
		p.items = append(p.items, it)
	}
	return p, nil
}

// entryList returns the entries of d in buf.
func entryList(buf []config.Entry, d *rlpb.RateLimitDescriptor) []config.Entry {
	buf = buf[:0]
	for _, e := range d.Entries {
		buf = append(buf, config.Entry{Key: e.Key, Value: e.Value})
	}
	return buf
}

// role returns what a denial of it does to the request.
func (it *item) role() shadow.Role {
	switch {
	case it.shadow:
		return shadow.Shadow
	case it.quota:
		return shadow.Quota
	}
	return shadow.Enforced
}

// stronger returns the role of a limit that is both a and b: enforced if
// either is, else a quota if either is, else shadow.
func stronger(a, b shadow.Role) shadow.Role {
	switch {
	case a == shadow.Enforced || b == shadow.Enforced:
		return shadow.Enforced
	case a == shadow.Quota || b == shadow.Quota:
		return shadow.Quota
	}
	return shadow.Shadow
}

// add puts limit of key into p.reqs for it, merged with an earlier request
// of the same state, and returns its index.
func (p *plan) add(it *item, key string, limit redlimit.Limit) int {
	for j := range p.reqs {
		r := &p.reqs[j]
		if r.StateID() != limit.StateID(key) {
			continue
		}
		// The same descriptor twice (or a rule and an override of one
		// period): one state, so one request for the sum of the costs,
		// under the tighter of the limits. Both come from the rule the
		// descriptor's entries match, so they share its failure policy.
		// The request is enforced if either is, and a debit if either is:
		// what either's hits need.
		r.Cost = min(r.Cost+it.cost, redlimit.MaxCost)
		if limit.Max() < r.Limit.Max() {
			r.Limit = limit
		}
		p.roles[j] = stronger(p.roles[j], it.role())
		r.Debit = r.Debit || it.debit
		return j
	}
	p.reqs = append(p.reqs, redlimit.Request{Key: key, Limit: limit, Cost: it.cost, Debit: it.debit})
	p.roles = append(p.roles, it.role())
	return len(p.reqs) - 1
}

// hitsOf returns what descriptor d of req costs, and whether its hits are
// a debit or an admission. A debit is recorded whatever the limit says. An
// admission is denied, consuming nothing, when it does not fit. This is
// where the counting of a rule (config.Counting) turns into the counting
// of a request.
//
// The cost is the descriptor's own hits_addend if set. Its 0 checks
// without consuming, as envoyproxy/ratelimit has it. Else the cost is the
// request's, where 0 means 1. validate has checked it. The counting is the
// matched rule's (its own or its file's), else Options.Counting, else
// auto. Under auto, a descriptor is a debit when it carries its own
// hits_addend. Envoy sets it from a route's hits_addend. The
// check-then-debit flow of cost budgets does so for the cost it measured
// after the work (apply_on_stream_done).
func (s *Service) hitsOf(req *pb.RateLimitRequest, d *rlpb.RateLimitDescriptor, rule *config.Rule) (cost int64, debit bool) {
	cost = int64(max(1, req.HitsAddend))
	if d.HitsAddend != nil {
		cost = int64(d.HitsAddend.Value)
	}
	c := s.opts.Counting
	if rule != nil && rule.Counting != config.CountingDefault {
		c = rule.Counting
	}
	switch c {
	case config.CountingDebit:
		return cost, cost > 0
	case config.CountingAdmission:
		return cost, false
	}
	return cost, cost > 0 && d.HitsAddend != nil
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
		// In a calendar rule's unit, the override counts in its calendar.
		if c := rule.Limit.Calendar; !c.IsZero() && name == c.Unit.String() && period == config.Units[name] {
			lim.Period, lim.Calendar = rule.Limit.Period, c
		}
	}
	if lim.Algorithm == redlimit.TokenBucket {
		lim.Burst = lim.Count
	}
	if err := s.checkOverrideRule(lim, rule, i); err != nil {
		return err
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("%w: descriptor %d: limit override %d per %s, %s: %w", ErrInvalidRequest, i, o.RequestsPerUnit, period, lim.Algorithm, err)
	}
	it.limit = lim
	it.current.RequestsPerUnit = o.RequestsPerUnit
	it.current.Unit = responseUnit(name)
	it.current.UnitMultiplier = o.UnitMultiplier
	return nil
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
