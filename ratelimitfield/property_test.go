package ratelimitfield_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// randomDuration returns a wait biased to the edges: small, whole and
// fractional seconds, and the largest Durations below Never.
func randomDuration(rng *rand.Rand) time.Duration {
	switch rng.IntN(6) {
	case 0:
		return time.Duration(rng.Int64N(3 * int64(time.Second)))
	case 1:
		return time.Duration(rng.Int64N(1000)) * time.Second
	case 2:
		return time.Duration(rng.Int64N(int64(redlimit.MaxPeriod)))
	case 3:
		return redlimit.Never - 1 - time.Duration(rng.Int64N(2*int64(time.Second)))
	case 4:
		return time.Duration(rng.Int64()) // anything below Never
	}
	return 9223372036*time.Second - time.Duration(rng.Int64N(3*int64(time.Second)))
}

// TestFieldsNeverTellEarly: for random results, every field Write sets
// parses back, and every reset it gives (RateLimit's t, X-RateLimit-Reset,
// RateLimit-Reset) and Retry-After is a whole number of seconds at least
// the wait it stands for: ResetAfter when allowed, RetryAfter when denied,
// none only for Never.
func TestFieldsNeverTellEarly(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	// atLeast reports whether s whole seconds are at least d.
	atLeast := func(s int64, d time.Duration) bool {
		return s >= 0 && (s > math.MaxInt64/int64(time.Second) || time.Duration(s)*time.Second >= d)
	}
	for range 20000 {
		res := redlimit.Result{Allowed: rng.IntN(2) == 0, Max: 1 + rng.Int64N(redlimit.MaxCount)}
		res.Remaining = rng.Int64N(res.Max + 1)
		res.ResetAfter = randomDuration(rng)
		wait := res.ResetAfter
		if !res.Allowed {
			res.Remaining = 0
			res.RetryAfter = max(1, randomDuration(rng)) // a denial's is positive
			if rng.IntN(10) == 0 {
				res.RetryAfter = redlimit.Never
			}
			wait = res.RetryAfter
		}
		for _, style := range []ratelimitfield.Style{ratelimitfield.All, ratelimitfield.Envoy} {
			got := map[string]string{}
			style.Write([]ratelimitfield.Quota{{Name: "q", Limit: redlimit.PerSecond(res.Max), Result: res}},
				func(name, value string) { got[name] = value })
			resets := []string{ratelimitfield.HeaderXRateLimitReset}
			if style == ratelimitfield.Envoy {
				resets = []string{ratelimitfield.HeaderRateLimitReset}
			} else {
				ls, err := ratelimitfield.ParseRateLimit([]string{got[ratelimitfield.HeaderRateLimit]})
				if err != nil || len(ls) != 1 {
					t.Fatalf("%+v: RateLimit %q parses to %v, %v", res, got[ratelimitfield.HeaderRateLimit], ls, err)
				}
				if wait == redlimit.Never {
					if ls[0].Reset >= 0 {
						t.Errorf("%+v: RateLimit %q has a reset", res, got[ratelimitfield.HeaderRateLimit])
					}
				} else if ls[0].Reset < wait {
					t.Errorf("%+v: RateLimit %q says %v, before %v", res, got[ratelimitfield.HeaderRateLimit], ls[0].Reset, wait)
				}
			}
			for _, h := range resets {
				v, ok := got[h]
				if wait == redlimit.Never {
					if ok {
						t.Errorf("%+v: %s %q for Never", res, h, v)
					}
					continue
				}
				s, err := strconv.ParseInt(v, 10, 64)
				if !ok || err != nil || !atLeast(s, wait) {
					t.Errorf("%+v: %s is %q (set %v), before %v", res, h, v, ok, wait)
				}
			}
		}
		if !res.Allowed {
			v, ok := ratelimitfield.RetryAfterValue(res.RetryAfter)
			if res.RetryAfter == redlimit.Never {
				if ok {
					t.Errorf("Retry-After %q for Never", v)
				}
				continue
			}
			s, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || s < 1 || !atLeast(s, res.RetryAfter) {
				t.Errorf("Retry-After %q (set %v) for %v", v, ok, res.RetryAfter)
			}
		}
	}
}
