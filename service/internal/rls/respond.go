package rls

import (
	"strings"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// respond writes the statuses of the limited descriptors of p into resp,
// the overall code, and the header fields; and reports every descriptor to
// the observer. A quota over its limit is OVER_LIMIT in its own status,
// whatever the request's answer.
func (s *Service) respond(req *pb.RateLimitRequest, p *plan, resp *pb.RateLimitResponse) {
	for i := range p.items {
		it := &p.items[i]
		st := resp.Statuses[it.desc]
		st.CurrentLimit = it.current
		st.LimitRemaining = clampUint32(it.res.Remaining)
		st.DurationUntilReset = setDuration(&p.parts[it.desc].reset, resetOf(it.res))
		outcome := Allowed
		switch {
		case it.res.Allowed:
		case it.res.Source == redlimit.Undecided:
			outcome = Undecided
			st.Code = pb.RateLimitResponse_UNKNOWN
		case it.shadow:
			outcome = ShadowDenied
		default:
			outcome = Denied
			st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
		if it.slot != nil {
			it.slot.observe(s.opts.Observer, req.Domain, outcome, it.res.Source, req.Descriptors[it.desc].Entries)
		} else {
			s.opts.Observer.Descriptor(req.Domain, it.label, outcome, it.res.Source, req.Descriptors[it.desc].Entries)
		}
		if s.hits != nil {
			s.hits.Hits(req.Domain, it.label, envoyHitsOf(it.cost, it.limit.Max(), it.res, it.shadow, s.opts.NearLimitRatio))
		}
	}
	if p.denied {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	if s.opts.Headers != ratelimitfield.None {
		resp.ResponseHeadersToAdd = s.headers(p)
	}
}

// resetOf returns duration_until_reset for a result. When the request was
// allowed, it is how long until the whole allowance is back if nothing
// else is admitted (Result.ResetAfter). When it was denied, it is how long
// until a request of the same cost could pass (Result.RetryAfter). If it
// never can (its cost is above the limit), it is ResetAfter. This is the
// httplimit package's reset of the RateLimit field too, but for that last
// case. There httplimit's field has no reset, and duration_until_reset
// needs one.
//
// For a fixed window both are the end of the window, as in
// envoyproxy/ratelimit. For a sliding log, ResetAfter is when the newest
// request counted leaves the log. For a sliding window, it is when the
// current window's count stops weighing: the end of the next window. For
// a token bucket, it is when the bucket is full again. A denial's
// RetryAfter comes as soon as enough leaves the log, the weighted count
// drops enough, or enough tokens are back.
func resetOf(res redlimit.Result) time.Duration {
	if res.Allowed || res.RetryAfter == redlimit.Never {
		return max(0, res.ResetAfter)
	}
	return max(0, res.RetryAfter)
}

// setDuration sets dst to d, as durationpb.New makes it, and returns it.
func setDuration(dst *durationpb.Duration, d time.Duration) *durationpb.Duration {
	nanos := d.Nanoseconds()
	dst.Seconds, dst.Nanos = nanos/1e9, int32(nanos%1e9)
	return dst
}

// headers returns the rate-limit fields of the enforced items of p, and of
// its quotas when they denied the request. It adds Retry-After when the
// request was denied and can be retried. It returns nil when every item is
// in shadow mode, which never shows in the fields.
func (s *Service) headers(p *plan) []*corepb.HeaderValue {
	var quotas []ratelimitfield.Quota
	var enforced []redlimit.Result
	firstQuota := redlimit.Never // when the first spent quota could pass
	for i := range p.items {
		it := &p.items[i]
		if it.shadow || it.quota && !p.quotaDenied {
			continue
		}
		quotas = append(quotas, ratelimitfield.Quota{Name: it.policyName(), Limit: it.limit, Result: it.res})
		if !it.quota {
			enforced = append(enforced, it.res)
		} else if !it.res.Allowed && it.res.RetryAfter < firstQuota {
			firstQuota = it.res.RetryAfter
		}
	}
	var h []*corepb.HeaderValue
	s.opts.Headers.Write(quotas, func(name, value string) {
		if to, ok := s.opts.HeaderNames[name]; ok {
			name = to
		}
		h = append(h, &corepb.HeaderValue{Key: name, Value: value})
	})
	retry := redlimit.RetryAfter(enforced)
	if p.quotaDenied {
		retry = firstQuota
	}
	if v, ok := ratelimitfield.RetryAfterValue(retry); ok {
		h = append(h, &corepb.HeaderValue{Key: ratelimitfield.HeaderRetryAfter, Value: v})
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

// lowerUnits are the response's units by their names in lower case, as
// the configuration and limit overrides name them (see responseUnit).
var lowerUnits = func() map[string]pb.RateLimitResponse_RateLimit_Unit {
	m := make(map[string]pb.RateLimitResponse_RateLimit_Unit)
	for name, v := range pb.RateLimitResponse_RateLimit_Unit_value {
		m[strings.ToLower(name)] = pb.RateLimitResponse_RateLimit_Unit(v)
	}
	return m
}()

// responseUnit returns the response's unit for an envoy unit name
// ("second" ... "year"), UNKNOWN for any other.
func responseUnit(name string) pb.RateLimitResponse_RateLimit_Unit {
	if v, ok := lowerUnits[name]; ok { // the usual case
		return v
	}
	if v, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(name)]; ok {
		return pb.RateLimitResponse_RateLimit_Unit(v)
	}
	return pb.RateLimitResponse_RateLimit_UNKNOWN
}
