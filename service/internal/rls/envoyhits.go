package rls

import (
	"math"

	"github.com/redlimit/redlimit"
)

// DefaultNearLimitRatio is Options.NearLimitRatio's default, as
// envoyproxy/ratelimit's NEAR_LIMIT_RATIO.
const DefaultNearLimitRatio = 0.8

// EnvoyHits are the hits of one descriptor as envoyproxy/ratelimit's stats
// count them: total_hits, over_limit, near_limit, within_limit and
// shadow_mode. Each counts hits (hits_addend), not requests.
type EnvoyHits struct {
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode uint64
}

// Add returns the sum of h and o.
func (h EnvoyHits) Add(o EnvoyHits) EnvoyHits {
	return EnvoyHits{
		TotalHits:   h.TotalHits + o.TotalHits,
		OverLimit:   h.OverLimit + o.OverLimit,
		NearLimit:   h.NearLimit + o.NearLimit,
		WithinLimit: h.WithinLimit + o.WithinLimit,
		ShadowMode:  h.ShadowMode + o.ShadowMode,
	}
}

// HitCounter is implemented by an [Observer] that also counts hits as
// envoyproxy/ratelimit does. Hits is called once per limited descriptor
// that is not unlimited, beside Observer.Descriptor, with the same domain
// and rule label. It must be safe for concurrent use and fast.
type HitCounter interface {
	Hits(domain, rule string, h EnvoyHits)
}

// envoyHitsOf returns the hits of a descriptor of cost under a limit of limit
// that came to res, by the arithmetic of envoyproxy/ratelimit's base
// limiter. Its counter after the hits is what res shows used, plus the cost
// when denied: redlimit's denials consume nothing, envoyproxy/ratelimit's
// do. The near-limit threshold is floor(limit × ratio), in float32 as there.
func envoyHitsOf(cost, limit int64, res redlimit.Result, shadow bool, ratio float64) EnvoyHits {
	if cost <= 0 {
		return EnvoyHits{}
	}
	n := uint64(cost)
	h := EnvoyHits{TotalHits: n}
	switch {
	case res.Source == redlimit.Undecided:
		return h
	case res.Source == redlimit.FromDenyCache:
		h.OverLimit = n
		if shadow {
			h.ShadowMode = n
		}
		return h
	}
	lim := uint64(max(0, limit))
	near := uint64(math.Floor(float64(float32(lim) * float32(ratio))))
	used := uint64(0)
	if r := res.Remaining; r >= 0 && r < limit {
		used = uint64(limit - r)
	}
	if res.Allowed {
		before := used - min(used, n)
		h.WithinLimit = n
		if used > near {
			h.NearLimit = used - max(near, before)
		}
		return h
	}
	// A denial within the limit (a sliding window's weighted count, a
	// token bucket's refill) counts every hit over the limit.
	before, after := used, used+n
	if before >= lim || after <= lim {
		h.OverLimit = n
	} else {
		h.OverLimit = after - lim
		h.NearLimit = lim - max(near, before)
	}
	if shadow {
		h.ShadowMode = h.OverLimit
	}
	return h
}
