package rls

import (
	"context"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
)

// undecidedLimiter plays a store that decides in parts (the Redis store on
// Cluster) and could not decide some parts: in a denied decision, every
// limit whose key holds mark comes back [redlimit.Undecided], as
// redisstore documents for a group that failed while another denied.
type undecidedLimiter struct {
	redlimit.Limiter
	mark string
}

func (l undecidedLimiter) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	d, err := l.Limiter.AllowAll(ctx, reqs)
	if err != nil || d.Allowed {
		return d, err
	}
	for i, r := range reqs {
		if strings.Contains(r.Key, l.mark) {
			d.Results[i] = redlimit.Result{Max: r.Limit.Max(), Source: redlimit.Undecided}
		}
	}
	return d, nil
}

// TestUndecidedLimits: a limit the store could not decide neither denies
// nor allows. When only a shadow limit denied, the enforced limits are asked
// again; beside a real denial, its status is UNKNOWN, not OVER_LIMIT.
func TestUndecidedLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	f.svc.opts.Limiter = undecidedLimiter{Limiter: f.store, mark: "undecided"}
	f.svc.SetConfig(mustConfig(t, apiDomain()))

	// Use up the shadow limit on /search (5/min): it then denies, in shadow.
	for range 5 {
		f.do(request("api", desc("path", "/search")))
	}
	ip := desc("remote_address", "10.9.9.9-undecided")
	resp := f.do(request("api", desc("path", "/search"), ip))
	if got := sig(resp); got != "O:OO" {
		t.Fatalf("shadow denial beside an undecided enforced limit: %s, want O:OO (the enforced limit asked again)", got)
	}
	if r := remaining(resp); r[1] != 2 {
		t.Errorf("per_ip remaining %d after its first request, want 2", r[1])
	}

	// Use up per_ip (3/min) of another address: a real denial beside the
	// undecided limit.
	other := func() *pb.RateLimitRequest {
		return request("api", desc("remote_address", "10.0.0.7"), desc("tenant", "acme", "user", "u-undecided"))
	}
	for range 3 {
		f.do(request("api", desc("remote_address", "10.0.0.7")))
	}
	resp = f.do(other())
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("overall %s, want OVER_LIMIT", resp.OverallCode)
	}
	if c := resp.Statuses[0].Code; c != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("the denying descriptor: %s, want OVER_LIMIT", c)
	}
	if c := resp.Statuses[1].Code; c != pb.RateLimitResponse_UNKNOWN {
		t.Errorf("the undecided descriptor: %s, want UNKNOWN", c)
	}
	if n := f.obs.count("api api.tenant_acme.user undecided undecided"); n != 1 {
		t.Errorf("undecided descriptors observed: %d, want 1 (%v)", n, f.obs.descs)
	}
}
