// Package shadow decides a request whose limits have roles. A limit is
// enforced, in shadow mode, or a quota. A shadow limit is decided and
// counted but never denies. Quotas deny only together. This is the one
// meaning of shadow mode. httplimit and grpclimit (through their rules)
// and the rate limit service share it.
//
// # What a shadow limit counts
//
// Each shadow limit counts a request as if it alone were added to the
// enforced limits. It consumes when the enforced limits and it allow the
// request, and only then. So its counts say what enforcing it, and only
// it, would do. The requests it denies are those that enforcing it would
// refuse. Trying a second rule in shadow mode does not change the first's
// counts. The enforced limits consume exactly as they would without any
// shadow limit. With every limit in shadow mode, each counts as if it
// were the only one enforced. envoyproxy/ratelimit's shadow_mode likewise
// counts each limit on its own, whatever the others say. But it counts
// every request, denied or not. A redlimit limit consumes only for
// requests it admits.
//
// Every limit's answer is its own, as in a [redlimit.Decision]. A shadow
// limit denies when it would deny the request if enforced, whatever the
// other limits say. A denial consumes nothing.
//
// # Quotas
//
// [Decide] also takes quota limits (envoyproxy/ratelimit's quota_mode).
// Each counts as a shadow limit does, and its answer is its own. But a
// request whose quota limits all deny is denied, and then consumes
// nothing. Take several backends, each under a quota. A request passes
// while one has room. It consumes the quotas that have room, and the
// enforced limits.
//
// # Round trips
//
// All limits go to the limiter in one AllowAll. In the usual case every
// one allows, and that one call consumed them all. When an enforced limit
// denies, the request is denied and nothing was consumed. When only
// shadow limits deny, they have their answer. The others are decided
// again without them: two calls. There are more only if the store's state
// changes between them. Each call drops at least one shadow limit.
//
// # Debits
//
// A [redlimit.Request.Debit] is counted by the first call whatever it and
// the others say. Its answer is final: it is left out of the calls after
// it. A debit that did not fit denies as any limit of its role does.
package shadow

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

// An Allower decides several limits as one, as [redlimit.Limiter.AllowAll]
// does.
type Allower interface {
	AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error)
}

// A Decision is the answer to a request of enforced and shadow limits.
type Decision struct {
	// Allowed reports whether the request may proceed: every enforced
	// limit allowed it, and one quota limit if it has any. Only then did
	// any admission consume; debits consumed either way.
	Allowed bool
	// QuotaDenied reports whether the request was denied because every
	// quota limit denied it, and no enforced limit did.
	QuotaDenied bool
	// RetryAfter is how long until the request could pass: as the enforced
	// limits that denied it say ([redlimit.RetryAfter]), or when the first
	// quota limit could pass; 0 when Allowed.
	RetryAfter time.Duration
	// Results holds each limit's answer, in the order of the requests.
	Results []redlimit.Result
}

// Role is what a limit's denial does to the request.
type Role uint8

const (
	// Enforced: a denial denies the request.
	Enforced Role = iota
	// Shadow: a denial never denies the request.
	Shadow
	// Quota: a denial denies the request only when every Quota limit of
	// the request denies it (envoyproxy/ratelimit's quota_mode): a request
	// needs one quota with room.
	Quota
)

// Decide decides reqs with lim, as the package documentation says.
// roles[i] is the role of reqs[i] (nil: all enforced). It returns the
// limiter's error. It returns one wrapping [redlimit.ErrBadReply] when the
// limiter answers a wrong number of results, or a denial that no limit
// made. Roles of another number than the requests are an error wrapping
// [redlimit.ErrInvalidLimit].
func Decide(ctx context.Context, lim Allower, reqs []redlimit.Request, roles []Role) (Decision, error) {
	if roles != nil && len(roles) != len(reqs) {
		return Decision{}, fmt.Errorf("shadow: %w: %d roles for %d limits", redlimit.ErrInvalidLimit, len(roles), len(reqs))
	}
	role := func(i int) Role {
		if roles == nil {
			return Enforced
		}
		return roles[i]
	}
	shadow := func(i int) bool { return role(i) != Enforced }
	quotas := 0
	for i := range reqs {
		if role(i) == Quota {
			quotas++
		}
	}
	quotaDenied := 0 // the quota limits that denied, so far
	d, err := allowAll(ctx, lim, reqs)
	if err != nil {
		return Decision{}, err
	}
	out := Decision{Allowed: true, Results: d.Results} // the limiter's to give
	asked, at := reqs, []int(nil)                      // asked[k] is reqs[at[k]], or reqs[k] while at is nil
	index := func(k int) int {
		if at == nil {
			return k
		}
		return at[k]
	}
	for !d.Allowed {
		var enforcedDenied, shadowDenied bool
		for k, r := range d.Results {
			if r.Denied() {
				enforcedDenied = enforcedDenied || !shadow(index(k))
				shadowDenied = shadowDenied || shadow(index(k))
			}
		}
		if enforcedDenied {
			out.Allowed = false
			var enforced []redlimit.Result
			for i, r := range out.Results {
				if !shadow(i) {
					enforced = append(enforced, r)
				}
			}
			out.RetryAfter = redlimit.RetryAfter(enforced)
			return out, nil
		}
		if !shadowDenied {
			return Decision{}, fmt.Errorf("shadow: %w: a denial that no limit made", redlimit.ErrBadReply)
		}
		for k, r := range d.Results {
			if r.Denied() && role(index(k)) == Quota {
				quotaDenied++
			}
		}
		if quotas > 0 && quotaDenied == quotas {
			out.Allowed, out.QuotaDenied = false, true
			out.RetryAfter = firstRetry(out.Results, role)
			return out, nil
		}
		// The shadow limits that denied have their answer, and so have the
		// debits, counted already; the others are asked again without them.
		var next []redlimit.Request
		var nextAt []int
		for k, r := range d.Results {
			if i := index(k); !asked[k].Debit && (!shadow(i) || !r.Denied()) {
				next, nextAt = append(next, asked[k]), append(nextAt, i)
			}
		}
		if len(next) == 0 {
			break
		}
		asked, at = next, nextAt
		if d, err = allowAll(ctx, lim, asked); err != nil {
			return Decision{}, err
		}
		for k, r := range d.Results {
			out.Results[at[k]] = r
		}
	}
	return out, nil
}

// firstRetry returns the shortest RetryAfter of the quota limits' results:
// when the first of them could pass.
func firstRetry(results []redlimit.Result, role func(int) Role) time.Duration {
	var ra time.Duration
	for i, r := range results {
		if role(i) == Quota && r.Denied() && (ra == 0 || r.RetryAfter < ra) {
			ra = r.RetryAfter
		}
	}
	return ra
}

// allowAll asks lim to decide reqs, and checks that it answered a result
// for each.
func allowAll(ctx context.Context, lim Allower, reqs []redlimit.Request) (redlimit.Decision, error) {
	d, err := lim.AllowAll(ctx, reqs)
	if err == nil && len(d.Results) != len(reqs) {
		err = fmt.Errorf("shadow: %w: %d results for %d limits", redlimit.ErrBadReply, len(d.Results), len(reqs))
	}
	return d, err
}
