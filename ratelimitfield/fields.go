package ratelimitfield

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
)

// Names of the fields, as HTTP header fields spell them. gRPC metadata
// carries them in lower case.
const (
	// HeaderRateLimitPolicy lists the quota policies that apply to a
	// request (draft-ietf-httpapi-ratelimit-headers-10, Section 3).
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit holds the current service limit of the policy
	// closest to running out (draft-ietf-httpapi-ratelimit-headers-10,
	// Section 4).
	HeaderRateLimit = "RateLimit"
	// HeaderXRateLimitLimit is the most cost the tightest limit lets pass at once.
	HeaderXRateLimitLimit = "X-RateLimit-Limit"
	// HeaderXRateLimitRemaining is how much of it is left.
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	// HeaderXRateLimitReset is the number of seconds until it resets.
	HeaderXRateLimitReset = "X-RateLimit-Reset"
	// HeaderRateLimitLimit is the tightest limit's requests per period, as
	// envoyproxy/ratelimit names it (an earlier draft's name).
	HeaderRateLimitLimit = "RateLimit-Limit"
	// HeaderRateLimitRemaining is how much of it is left, as
	// envoyproxy/ratelimit names it.
	HeaderRateLimitRemaining = "RateLimit-Remaining"
	// HeaderRateLimitReset is the number of seconds until it resets, as
	// envoyproxy/ratelimit names it.
	HeaderRateLimitReset = "RateLimit-Reset"
	// HeaderRetryAfter is set on denials, in whole seconds (RFC 9110,
	// Section 10.2.3); see [RetryAfterValue].
	HeaderRetryAfter = "Retry-After"
)

// QuotaPolicy is one item of a RateLimit-Policy field, such as
// "peruser";q=100;w=60.
type QuotaPolicy struct {
	// Name identifies the policy; the RateLimit field refers to it.
	Name string
	// Quota is the "q" parameter: the quota units the policy allocates.
	Quota int64
	// Window is the "w" parameter, whole seconds; 0 when the item has none.
	Window time.Duration
}

// PolicyOf returns the quota policy that describes limit l under the given
// name: Quota is l.Count and Window is l.Period. The draft allows whole
// seconds only, so a Period that is not a whole number of seconds has no
// Window. For a token bucket the policy gives the rate (Count per Period),
// and the burst shows in the RateLimit field's remaining quota, which may
// then exceed Quota. A calendar period has no one length, so no Window.
func PolicyOf(name string, l redlimit.Limit) QuotaPolicy {
	p := QuotaPolicy{Name: name, Quota: l.Count}
	if l.Calendar.IsZero() && l.Period >= time.Second && l.Period%time.Second == 0 {
		p.Window = l.Period
	}
	return p
}

// String formats p as a structured-field list member: the name as a String,
// then q and, if set, w.
func (p QuotaPolicy) String() string {
	s := quoteString(p.Name) + ";q=" + strconv.FormatInt(p.Quota, 10)
	if p.Window > 0 {
		s += ";w=" + strconv.FormatInt(ceilSeconds(p.Window), 10)
	}
	return s
}

// ServiceLimit is one item of a RateLimit field, such as
// "peruser";r=42;t=17.
type ServiceLimit struct {
	// Name identifies the quota policy the limit belongs to.
	Name string
	// Remaining is the "r" parameter: the quota units left.
	Remaining int64
	// Reset is the "t" parameter, whole seconds until more quota is
	// available (the largest Duration for more seconds than it holds);
	// negative when the item has none.
	Reset time.Duration
}

// ServiceLimitOf returns the service limit that describes res under the
// given name. Remaining is res.Remaining. For an allowed result, Reset is
// res.ResetAfter: when the whole allowance is back. For a denial, it is
// res.RetryAfter: when the request could pass, the same as Retry-After.
// Both are rounded up to whole seconds. A denial that can never pass
// ([redlimit.Never]) has no Reset.
func ServiceLimitOf(name string, res redlimit.Result) ServiceLimit {
	return ServiceLimit{Name: name, Remaining: max(0, res.Remaining), Reset: resetOf(res)}
}

// resetOf returns the reset time of res as ServiceLimitOf defines it,
// rounded up to whole seconds; -1 for none. A wait whose whole seconds a
// Duration cannot hold gets the largest Duration. String rounds it up
// again.
func resetOf(res redlimit.Result) time.Duration {
	if res.Allowed {
		return seconds(ceilSeconds(res.ResetAfter))
	}
	if res.RetryAfter == redlimit.Never {
		return -1
	}
	return seconds(RetryAfterSeconds(res.RetryAfter))
}

// String formats l as a structured-field list member: the name as a String,
// then r and, if set, t.
func (l ServiceLimit) String() string {
	s := quoteString(l.Name) + ";r=" + strconv.FormatInt(l.Remaining, 10)
	if l.Reset >= 0 {
		s += ";t=" + strconv.FormatInt(ceilSeconds(l.Reset), 10)
	}
	return s
}

// ParseRateLimitPolicy parses the lines of a RateLimit-Policy field, as
// [http.Header.Values] returns them. An error means the field is malformed
// and, as the draft says, must be ignored.
func ParseRateLimitPolicy(lines []string) ([]QuotaPolicy, error) {
	items, err := parseList(lines)
	if err != nil {
		return nil, err
	}
	out := make([]QuotaPolicy, 0, len(items))
	for i, it := range items {
		name, err := itemName(it)
		if err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit-Policy item %d: %w", i, err)
		}
		p := QuotaPolicy{Name: name}
		if p.Quota, err = intParam(it, "q", true, 0); err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit-Policy %q: %w", name, err)
		}
		w, err := intParam(it, "w", false, 1)
		if err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit-Policy %q: %w", name, err)
		}
		p.Window = seconds(max(w, 0))
		out = append(out, p)
	}
	return out, nil
}

// ParseRateLimit parses the lines of a RateLimit field, as
// [http.Header.Values] returns them. An error means the field is malformed
// and, as the draft says, must be ignored.
func ParseRateLimit(lines []string) ([]ServiceLimit, error) {
	items, err := parseList(lines)
	if err != nil {
		return nil, err
	}
	out := make([]ServiceLimit, 0, len(items))
	for i, it := range items {
		name, err := itemName(it)
		if err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit item %d: %w", i, err)
		}
		l := ServiceLimit{Name: name}
		if l.Remaining, err = intParam(it, "r", true, 0); err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit %q: %w", name, err)
		}
		t, err := intParam(it, "t", false, 0)
		if err != nil {
			return nil, fmt.Errorf("ratelimitfield: RateLimit %q: %w", name, err)
		}
		l.Reset = seconds(t)
		if t < 0 {
			l.Reset = -1
		}
		out = append(out, l)
	}
	return out, nil
}

// seconds returns n seconds, or the largest Duration for more than it holds
// (292 years; a field's Integer may say up to 31 million years).
func seconds(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// itemName returns the policy name of an item: a String as draft 10 says, or
// a Token as earlier and later drafts allow.
func itemName(it sfItem) (string, error) {
	switch v := it.value.(type) {
	case string:
		return v, nil
	case sfToken:
		return string(v), nil
	}
	return "", fmt.Errorf("%w: the policy name is a %T, want a string", errSyntax, it.value)
}

// intParam returns the Integer parameter key of it, at least lowest; -1 when
// it is absent and not required.
func intParam(it sfItem, key string, required bool, lowest int64) (int64, error) {
	v, ok := it.param(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: no %q parameter", errSyntax, key)
		}
		return -1, nil
	}
	n, ok := v.(int64)
	if !ok || n < lowest {
		return 0, fmt.Errorf("%w: %q is %v, want an integer of at least %d", errSyntax, key, v, lowest)
	}
	return n, nil
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
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
func RetryAfterSeconds(d time.Duration) int64 { return max(1, ceilSeconds(d)) }

// RetryAfterValue returns the Retry-After field's value for a denial whose
// request could pass after d ([redlimit.Decision.RetryAfter]). It reports
// whether to send one. It is not sent for d <= 0 (no denial). Nor is it
// sent for [redlimit.Never]: the request can never pass, and the client
// should not come back.
func RetryAfterValue(d time.Duration) (string, bool) {
	if d <= 0 || d == redlimit.Never {
		return "", false
	}
	return strconv.FormatInt(RetryAfterSeconds(d), 10), true
}
