package ratelimitfield

import (
	"strconv"
	"strings"

	"github.com/redlimit/redlimit"
)

// A Quota is one limit that applied to a request, and what it answered: the
// input of [Style.Write].
type Quota struct {
	// Name names the quota policy, such as a rule's name.
	Name string
	// Limit gives the policy's quota and window ([PolicyOf]) and the
	// Envoy style's requests per period.
	Limit redlimit.Limit
	// Result is the limit's answer to the request.
	Result redlimit.Result
}

// Write calls set with the name and value of each field s selects for
// quotas. quotas are the enforced limits that applied to one request. A
// shadow limit decides nothing for the client, so it has no field.
// RateLimit-Policy lists the policy of every quota, once per name, in
// order. The other fields describe the tightest quota
// ([redlimit.Tightest]):
//   - RateLimit: as [ServiceLimitOf] has it;
//   - X-RateLimit-Limit: its Result.Max;
//   - the Envoy style's RateLimit-Limit: its Limit.Count;
//   - the remaining and reset fields: its ServiceLimit's. The reset is
//     left out when it has none.
//
// Write sets nothing for no quotas. Retry-After is not among the fields:
// see [RetryAfterValue].
func (s Style) Write(quotas []Quota, set func(name, value string)) {
	if len(quotas) == 0 || s == None || !s.Valid() {
		return
	}
	if s.draft() {
		set(HeaderRateLimitPolicy, policies(quotas))
	}
	results := make([]redlimit.Result, len(quotas))
	for i, q := range quotas {
		results[i] = q.Result
	}
	q := quotas[redlimit.Tightest(results)]
	sl := ServiceLimitOf(q.Name, q.Result)
	remaining := strconv.FormatInt(sl.Remaining, 10)
	reset, hasReset := "", sl.Reset >= 0
	if hasReset {
		reset = strconv.FormatInt(ceilSeconds(sl.Reset), 10)
	}
	if s.draft() {
		set(HeaderRateLimit, sl.String())
	}
	if s.x() {
		set(HeaderXRateLimitLimit, strconv.FormatInt(q.Result.Max, 10))
		set(HeaderXRateLimitRemaining, remaining)
		if hasReset {
			set(HeaderXRateLimitReset, reset)
		}
	}
	if s == Envoy {
		set(HeaderRateLimitLimit, strconv.FormatInt(q.Limit.Count, 10))
		set(HeaderRateLimitRemaining, remaining)
		if hasReset {
			set(HeaderRateLimitReset, reset)
		}
	}
}

// policies returns the RateLimit-Policy field of quotas: each quota's
// policy, the first of each name only.
func policies(quotas []Quota) string {
	var b strings.Builder
	for i, q := range quotas {
		if seen(quotas[:i], q.Name) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(PolicyOf(q.Name, q.Limit).String())
	}
	return b.String()
}

// seen reports whether a quota of quotas is named name.
func seen(quotas []Quota, name string) bool {
	for _, q := range quotas {
		if q.Name == name {
			return true
		}
	}
	return false
}
