package rls

import (
	"strconv"
	"strings"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/ruleset"
)

// respond writes the statuses of the limited descriptors of p into resp,
// the overall code, and the header fields; and reports every descriptor to
// the observer.
func (s *Service) respond(req *pb.RateLimitRequest, p *plan, resp *pb.RateLimitResponse) {
	enforced := make([]int, 0, len(p.items))
	for i := range p.items {
		it := &p.items[i]
		st := resp.Statuses[it.desc]
		st.CurrentLimit = it.current
		st.LimitRemaining = clampUint32(it.res.Remaining)
		st.DurationUntilReset = durationpb.New(resetOf(it.res))
		outcome := Allowed
		switch {
		case it.res.Allowed:
		case it.shadow:
			outcome = ShadowDenied
		default:
			outcome = Denied
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
		s.opts.Observer.Descriptor(req.Domain, it.label, outcome, it.res.Source, req.Descriptors[it.desc].Entries)
		if !it.shadow {
			enforced = append(enforced, i)
		}
	}
	if s.opts.Headers != HeadersOff && len(enforced) > 0 {
		resp.ResponseHeadersToAdd = s.headers(p, enforced)
	}
}

// resetOf returns duration_until_reset for a result: when the request was
// allowed, how long until the whole allowance is back if nothing else is
// admitted (Result.ResetAfter); when it was denied, how long until a request
// of the same cost could pass (Result.RetryAfter), or ResetAfter if it never
// can (its cost is above the limit). This is the httplimit package's
// definition of the RateLimit field's reset, too, except for that last case,
// where httplimit's field has no reset and duration_until_reset needs one.
//
// For a fixed window both are the end of the window, as in
// envoyproxy/ratelimit. For a sliding log, ResetAfter is when the newest
// request counted leaves the log; for a sliding window, when the current
// window's count stops weighing (the end of the next window); for a token
// bucket, when the bucket is full again. A denial's RetryAfter comes as soon
// as enough leaves the log, the weighted count drops enough, or enough
// tokens are back.
func resetOf(res redlimit.Result) time.Duration {
	if res.Allowed || res.RetryAfter == redlimit.Never {
		return max(0, res.ResetAfter)
	}
	return max(0, res.RetryAfter)
}

// Header field names. The IETF, X-RateLimit and Retry-After fields are
// the httplimit package's, formatted by it too.
const (
	HeaderRateLimitPolicy     = httplimit.HeaderRateLimitPolicy
	HeaderRateLimit           = httplimit.HeaderRateLimit
	HeaderXRateLimitLimit     = httplimit.HeaderXRateLimitLimit
	HeaderXRateLimitRemaining = httplimit.HeaderXRateLimitRemaining
	HeaderXRateLimitReset     = httplimit.HeaderXRateLimitReset
	HeaderEnvoyLimit          = "RateLimit-Limit"
	HeaderEnvoyRemaining      = "RateLimit-Remaining"
	HeaderEnvoyReset          = "RateLimit-Reset"
	HeaderRetryAfter          = httplimit.HeaderRetryAfter
)

// headers returns the header fields for the enforced item closest to running
// out (redlimit.Decision.Tightest over the enforced items), and Retry-After
// when the request was denied and can be retried.
func (s *Service) headers(p *plan, enforced []int) []*corepb.HeaderValue {
	results := make([]redlimit.Result, len(enforced))
	for k, i := range enforced {
		results[k] = p.items[i].res
	}
	d := redlimit.Decision{Results: results}
	it := &p.items[enforced[d.Tightest()]]
	res := it.res
	remaining := strconv.FormatInt(max(0, res.Remaining), 10)
	reset := strconv.FormatInt(ruleset.CeilSeconds(resetOf(res)), 10)
	var h []*corepb.HeaderValue
	switch s.opts.Headers {
	case HeadersIETF:
		name := it.policyName()
		limit := httplimit.ServiceLimit{Name: name, Remaining: max(0, res.Remaining), Reset: resetOf(res)}
		h = append(h,
			&corepb.HeaderValue{Key: HeaderRateLimitPolicy, Value: httplimit.PolicyOf(name, it.limit).String()},
			&corepb.HeaderValue{Key: HeaderRateLimit, Value: limit.String()})
	case HeadersXRateLimit:
		h = append(h,
			&corepb.HeaderValue{Key: HeaderXRateLimitLimit, Value: strconv.FormatInt(it.limit.Max(), 10)},
			&corepb.HeaderValue{Key: HeaderXRateLimitRemaining, Value: remaining},
			&corepb.HeaderValue{Key: HeaderXRateLimitReset, Value: reset})
	case HeadersEnvoy:
		h = append(h,
			&corepb.HeaderValue{Key: HeaderEnvoyLimit, Value: strconv.FormatUint(uint64(it.current.RequestsPerUnit), 10)},
			&corepb.HeaderValue{Key: HeaderEnvoyRemaining, Value: remaining},
			&corepb.HeaderValue{Key: HeaderEnvoyReset, Value: reset})
	}
	if ra := d.RetryAfter(); ra > 0 && ra != redlimit.Never {
		h = append(h, &corepb.HeaderValue{Key: HeaderRetryAfter, Value: strconv.FormatInt(ruleset.RetryAfterSeconds(ra), 10)})
	}
	return h
}

// policyName returns the name of the item's quota policy: the rule's name,
// else its label.
func (it *item) policyName() string {
	if it.current != nil && it.current.Name != "" {
		return it.current.Name
	}
	return it.label
}

// responseUnit returns the response's unit for an envoy unit name
// ("second" ... "year"), UNKNOWN for any other.
func responseUnit(name string) pb.RateLimitResponse_RateLimit_Unit {
	if v, ok := lowerUnits[name]; ok { // the usual case, without ToUpper's copy
		return v
	}
	if v, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(name)]; ok {
		return pb.RateLimitResponse_RateLimit_Unit(v)
	}
	return pb.RateLimitResponse_RateLimit_UNKNOWN
}
