package rls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/service/internal/config"
)

// apiDomain is the configuration most tests use:
//
//	api
//	  remote_address                  3/min fixed_window "per_ip"
//	  remote_address=10.0.0.1         unlimited
//	  path=/login                     2/min sliding_log
//	  path=/search                    5/min sliding_window, shadow
//	  path=/docs/*                    4/s token_bucket burst 2
//	  tenant=acme
//	    user                          10/h sliding_window "acme_user"
//	  route                           100/min fixed_window "route", replaces per_ip
func apiDomain() *config.Domain {
	shadow := rule("api.path_/search", "", redlimit.PerMinute(5), "minute")
	shadow.Shadow = true
	route := rule("api.route", "route", redlimit.PerMinute(100).FixedWindow(), "minute")
	route.Replaces = []string{"per_ip"}
	return domain("api",
		node("remote_address", "", rule("api.remote_address", "per_ip", redlimit.PerMinute(3).FixedWindow(), "minute")),
		node("remote_address", "10.0.0.1", &config.Rule{Path: "api.remote_address_10.0.0.1", Unlimited: true}),
		node("path", "/login", rule("api.path_/login", "", redlimit.PerMinute(2).SlidingLog(), "minute")),
		node("path", "/search", shadow),
		node("path", "/docs/*", rule("api.path_/docs/*", "", redlimit.PerSecond(4).TokenBucket(2), "second")),
		node("tenant", "acme", nil,
			node("user", "", rule("api.tenant_acme.user", "acme_user", redlimit.PerHour(10), "hour"))),
		node("route", "", route),
	)
}

func TestNoConfigYet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	if f.svc.Ready() {
		t.Fatal("Ready before any configuration")
	}
	_, err := f.svc.ShouldRateLimit(context.Background(), request("api", desc("k", "v")))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("before the first config: %v, want Unavailable", err)
	}
	if _, err := f.svc.Decide(context.Background(), request("api", desc("k", "v"))); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("Decide: %v, want ErrNoConfig", err)
	}
	f.svc.SetConfig(nil) // ignored
	if f.svc.Ready() {
		t.Fatal("a nil config made the service ready")
	}
	f.svc.SetConfig(mustConfig(t, apiDomain()))
	if !f.svc.Ready() {
		t.Fatal("not Ready with a configuration")
	}
	f.do(request("api", desc("k", "v")))
	if f.obs.requests[AnswerUnavailable] != 2 || f.obs.requests[AnswerOK] != 1 {
		t.Fatalf("answers observed: %v", f.obs.requests)
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{MaxDescriptors: 3, MaxEntries: 2, MaxBytes: 40}, apiDomain())
	override := func(rpu uint32, unit typepb.RateLimitUnit, mult *wrapperspb.UInt32Value) *rlpb.RateLimitDescriptor {
		d := desc("remote_address", "1.2.3.4")
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit, UnitMultiplier: mult}
		return d
	}
	logOverride := desc("path", "/login")
	logOverride.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 200_000, Unit: typepb.RateLimitUnit_SECOND}
	for _, tc := range []struct {
		name string
		req  *pb.RateLimitRequest
		want string
	}{
		{"nil request", nil, "no request"},
		{"empty domain", request("", desc("k", "v")), "empty domain"},
		{"no descriptors", request("api"), "no descriptors"},
		{"descriptor without entries", request("api", desc("k", "v"), desc()), "descriptor 1 has no entries"},
		{"nil descriptor", request("api", nil), "descriptor 0 has no entries"},
		{"empty key", request("api", desc("k", "v", "", "v")), "descriptor 0, entry 1: empty key"},
		{"too many descriptors", request("api", desc("a", "1"), desc("b", "2"), desc("c", "3"), desc("d", "4")), "4 descriptors, at most 3"},
		{"too many entries", request("api", desc("a", "1", "b", "2", "c", "3")), "descriptor 0 has 3 entries, at most 2"},
		{"too many bytes", request("api", desc("a", strings.Repeat("x", 40))), "more than 40 bytes"},
		{"hits_addend too large", request("api", withHits(desc("k", "v"), math.MaxUint64)), "hits_addend 18446744073709551615 is above"},
		{"override unknown unit", request("api", override(5, typepb.RateLimitUnit_UNKNOWN, nil)), "unknown unit UNKNOWN"},
		{"override zero", request("api", override(0, typepb.RateLimitUnit_SECOND, nil)), "requests_per_unit is 0"},
		{"override zero multiplier", request("api", override(5, typepb.RateLimitUnit_SECOND, wrapperspb.UInt32(0))), "unit_multiplier 0 is not in"},
		{"override huge multiplier", request("api", override(5, typepb.RateLimitUnit_YEAR, wrapperspb.UInt32(math.MaxUint32))), "unit_multiplier 4294967295 is not in"},
		{"override beyond a sliding log", request("api", logOverride), "its count may not exceed rule api.path_/login's 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument with %q", err, tc.want)
			}
			_, err = f.svc.Decide(context.Background(), tc.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Decide: %v, want ErrInvalidRequest", err)
			}
		})
	}
}

func TestOptionsRejected(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Limiter: redlimit.Limiter(nil)},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	f := newFixture(t, Options{})
	for _, o := range []Options{
		{Limiter: f.store, MaxDescriptors: DefaultMaxDescriptors + 1},
		{Limiter: f.store, MaxEntries: -1},
		{Limiter: f.store, Headers: 9},
		{Limiter: f.store, DefaultAlgorithm: 9},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}

func TestUnknownDomainAndNoMatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	for _, req := range []*pb.RateLimitRequest{
		request("other", desc("remote_address", "1.2.3.4")),
		request("api", desc("nothing", "here"), desc("remote_address", "1.2.3.4", "too", "deep")),
		request("api", desc("tenant", "acme")), // a placeholder without a rule
	} {
		for range 10 {
			resp := f.do(req)
			for i, st := range resp.Statuses {
				if st.Code != pb.RateLimitResponse_OK || st.CurrentLimit != nil || st.LimitRemaining != 0 || st.DurationUntilReset != nil {
					t.Fatalf("%v: status %d = %v, want OK with no limit", req, i, st)
				}
			}
			if resp.OverallCode != pb.RateLimitResponse_OK || resp.ResponseHeadersToAdd != nil {
				t.Fatalf("%v: %v", req, resp)
			}
		}
	}
	if f.store.Len() != 0 {
		t.Fatalf("the store holds %d states after requests with no limit", f.store.Len())
	}
}

func TestLimitAndStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	f.clock.Set(redlimittestT0().Add(15 * time.Second)) // 45 s left in the minute
	req := request("api", desc("remote_address", "1.2.3.4"))
	for i, want := range []uint32{2, 1, 0} {
		resp := f.do(req)
		st := resp.Statuses[0]
		if sig(resp) != "O:O" || st.LimitRemaining != want {
			t.Fatalf("request %d: %s remaining %d, want OK with %d", i, sig(resp), st.LimitRemaining, want)
		}
		cl := st.CurrentLimit
		if cl.Name != "per_ip" || cl.RequestsPerUnit != 3 || cl.Unit != pb.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("current_limit %v", cl)
		}
		if d := st.DurationUntilReset.AsDuration(); d != 45*time.Second {
			t.Fatalf("duration_until_reset %s, want the end of the fixed window (45s)", d)
		}
	}
	resp := f.do(req)
	if sig(resp) != "X:X" || resp.Statuses[0].LimitRemaining != 0 || resp.Statuses[0].DurationUntilReset.AsDuration() != 45*time.Second {
		t.Fatalf("4th request: %s %v", sig(resp), resp.Statuses[0])
	}
	// Another address has its own count.
	if resp := f.do(request("api", desc("remote_address", "1.2.3.5"))); sig(resp) != "O:O" {
		t.Fatalf("another address: %s", sig(resp))
	}
	f.clock.Advance(45 * time.Second)
	if resp := f.do(req); sig(resp) != "O:O" || resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("next window: %s %v", sig(resp), resp.Statuses[0])
	}
	if n := f.obs.count("api api.remote_address denied store"); n != 1 {
		t.Fatalf("denials observed: %d, want 1", n)
	}
	if n := f.obs.count("api api.remote_address allowed store"); n != 5 {
		t.Fatalf("allowed observed: %d, want 5", n)
	}
	if n := f.obs.countKey(Denied, "remote_address=1.2.3.4"); n != 1 {
		t.Fatalf("denials of remote_address=1.2.3.4 observed: %d, want 1", n)
	}
}

func redlimittestT0() time.Time { return time.Unix(1_699_999_980, 0).UTC() }

// A request denied by one descriptor consumes none of its other
// descriptors' limits: they are decided in one AllowAll.
func TestDeniedRequestConsumesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	login := desc("path", "/login")
	user := desc("tenant", "acme", "user", "u1")
	f.do(request("api", login))
	f.do(request("api", login)) // login exhausted (2/min)
	for range 5 {
		resp := f.do(request("api", user, login))
		if sig(resp) != "X:OX" {
			t.Fatalf("user + exhausted login: %s, want X:OX", sig(resp))
		}
		if r := resp.Statuses[0].LimitRemaining; r != 9 {
			t.Fatalf("user's status shows %d remaining, want 9 (what it would have after)", r)
		}
	}
	resp := f.do(request("api", user))
	if r := resp.Statuses[0].LimitRemaining; r != 9 {
		t.Fatalf("user alone: %d remaining, want 9: the denied requests consumed the user's limit", r)
	}
}

// TestHitsAddend checks costs counted as admissions (a cost that does not
// fit is denied and consumes nothing), as counting: admission has them; by
// default a descriptor's own hits_addend is a debit (TestCounting).
func TestHitsAddend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Counting: config.CountingAdmission}, apiDomain())
	user := func() *rlpb.RateLimitDescriptor { return desc("tenant", "acme", "user", "h") }
	req := request("api", user())
	req.HitsAddend = 3
	if resp := f.do(req); remaining(resp)[0] != 7 {
		t.Fatalf("hits_addend 3: remaining %d, want 7", remaining(resp)[0])
	}
	req = request("api", withHits(user(), 5))
	req.HitsAddend = 3 // the descriptor's own overrides it
	if resp := f.do(req); remaining(resp)[0] != 2 {
		t.Fatalf("descriptor hits_addend 5: remaining %d, want 2", remaining(resp)[0])
	}
	if resp := f.do(request("api", user())); remaining(resp)[0] != 1 {
		t.Fatalf("hits_addend unset (0): remaining %d, want 1", remaining(resp)[0])
	}
	// Explicitly 0: checked, not consumed.
	for range 3 {
		if resp := f.do(request("api", withHits(user(), 0))); sig(resp) != "O:O" || remaining(resp)[0] != 1 {
			t.Fatalf("hits_addend 0 with 1 left: %s %v, want OK showing the 1 left", sig(resp), remaining(resp))
		}
	}
	// A cost above what is left is denied and consumes nothing.
	if resp := f.do(request("api", withHits(user(), 2))); sig(resp) != "X:X" {
		t.Fatalf("hits 2 with 1 left: %s", sig(resp))
	}
	f.do(request("api", user())) // the last one
	// A check-only descriptor with nothing left denies the request, and the
	// other descriptors consume nothing.
	other := desc("tenant", "acme", "user", "other")
	for range 3 {
		if resp := f.do(request("api", other, withHits(user(), 0))); sig(resp) != "X:OX" {
			t.Fatalf("check-only exhausted: %s, want X:OX", sig(resp))
		}
	}
	if resp := f.do(request("api", other)); remaining(resp)[0] != 9 {
		t.Fatalf("other consumed %d while denied", 10-1-remaining(resp)[0])
	}
	// A cost above the limit can never pass: denied, reset when the
	// allowance is whole again.
	if resp := f.do(request("api", withHits(desc("tenant", "acme", "user", "big"), 11))); sig(resp) != "X:X" || resp.Statuses[0].DurationUntilReset.AsDuration() != 0 {
		t.Fatalf("cost above the limit: %s %v", sig(resp), resp.Statuses[0])
	}
}

func TestUnlimited(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Headers: ratelimitfield.Draft}, apiDomain())
	for range 10 {
		resp := f.do(request("api", desc("remote_address", "10.0.0.1")))
		st := resp.Statuses[0]
		if sig(resp) != "O:O" || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil || resp.ResponseHeadersToAdd != nil {
			t.Fatalf("unlimited: %v", resp)
		}
	}
	if n := f.obs.count("api api.remote_address_10.0.0.1 unlimited store"); n != 10 {
		t.Fatalf("unlimited observed %d times", n)
	}
	if n := f.obs.countKey(Unlimited, "remote_address=10.0.0.1"); n != 10 {
		t.Fatalf("unlimited remote_address=10.0.0.1 observed %d times", n)
	}
}

// TestDenyAll checks requests_per_unit 0 (config.Rule.DenyAll): every
// request denied without asking the limiter, the request's other limits
// left unconsumed, in shadow mode only counted.
func TestDenyAll(t *testing.T) {
	t.Parallel()
	deny := func(path string, shadow bool) *config.Rule {
		return &config.Rule{Path: path, Unit: "second", DenyAll: true, Shadow: shadow,
			Limit: redlimit.Limit{Algorithm: redlimit.SlidingLog, Period: time.Second}}
	}
	blk := domain("blk",
		node("remote_address", "50.0.0.5", deny("blk.remote_address_50.0.0.5", false)),
		node("remote_address", "", rule("blk.remote_address", "", redlimit.PerMinute(5), "minute")),
		node("path", "/beta", deny("blk.path_/beta", true)),
		node("user", "", rule("blk.user", "", redlimit.PerHour(10), "hour")),
	)
	f := newFixture(t, Options{Headers: ratelimitfield.X}, blk)
	blocked, user := desc("remote_address", "50.0.0.5"), desc("user", "u")
	for _, d := range []*rlpb.RateLimitDescriptor{blocked, withHits(desc("remote_address", "50.0.0.5"), 0)} {
		resp := f.do(request("blk", d))
		st := resp.Statuses[0]
		if sig(resp) != "X:X" || st.CurrentLimit.GetRequestsPerUnit() != 0 || st.CurrentLimit.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND ||
			st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != time.Second {
			t.Fatalf("blocked address: %s %v", sig(resp), st)
		}
		h := headerMap(resp)
		if h[ratelimitfield.HeaderXRateLimitLimit] != "0" || h[ratelimitfield.HeaderXRateLimitRemaining] != "0" || h[ratelimitfield.HeaderRetryAfter] != "" {
			t.Fatalf("blocked address: headers %v, want limit 0, remaining 0 and no Retry-After", h)
		}
	}
	f.obs.mu.Lock()
	calls := f.obs.backend
	f.obs.mu.Unlock()
	if calls != 0 {
		t.Fatalf("the limiter was called %d times for a deny-all rule alone", calls)
	}
	for range 3 {
		if resp := f.do(request("blk", user, blocked)); sig(resp) != "X:OX" {
			t.Fatalf("user + blocked address: %s, want X:OX", sig(resp))
		}
	}
	if resp := f.do(request("blk", user)); remaining(resp)[0] != 9 {
		t.Fatalf("user after 3 blocked requests and 1 alone: remaining %d, want 9 (the blocked ones consumed it)", remaining(resp)[0])
	}
	// In shadow mode it only counts; the other limits are consumed.
	for i := range 3 {
		resp := f.do(request("blk", desc("path", "/beta"), user))
		if sig(resp) != "O:OO" || remaining(resp)[1] != uint32(8-i) {
			t.Fatalf("shadow deny-all, request %d: %s %v", i, sig(resp), remaining(resp))
		}
	}
	if n := f.obs.count("blk blk.remote_address_50.0.0.5 denied store"); n != 5 {
		t.Errorf("deny-all denials observed: %d, want 5", n)
	}
	if n := f.obs.count("blk blk.path_/beta shadow_denied store"); n != 3 {
		t.Errorf("shadow deny-all observed: %d, want 3", n)
	}
	// Other addresses get the key's limit.
	if resp := f.do(request("blk", desc("remote_address", "50.0.0.6"))); sig(resp) != "O:O" || remaining(resp)[0] != 4 {
		t.Fatalf("another address: %s %v", sig(resp), remaining(resp))
	}
}

func TestReplaces(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	// route replaces per_ip when both match: the per_ip limit (3/min) is
	// neither decided nor consumed.
	for i := range 5 {
		resp := f.do(request("api", desc("remote_address", "9.9.9.9"), desc("route", "r")))
		if sig(resp) != "O:OO" || resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].LimitRemaining != uint32(99-i) {
			t.Fatalf("request %d: %s %v", i, sig(resp), resp.Statuses)
		}
	}
	if resp := f.do(request("api", desc("remote_address", "9.9.9.9"))); remaining(resp)[0] != 2 {
		t.Fatalf("per_ip alone after being replaced: remaining %d, want 2", remaining(resp)[0])
	}
}

func TestShadowRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Headers: ratelimitfield.X}, apiDomain())
	search := desc("path", "/search") // 5/min, shadow
	user := desc("tenant", "acme", "user", "s")
	for i := range 8 {
		resp := f.do(request("api", search, user))
		if sig(resp) != "O:OO" {
			t.Fatalf("request %d: %s: a shadow rule denied", i, sig(resp))
		}
		if want := uint32(max(0, 4-i)); resp.Statuses[0].LimitRemaining != want {
			t.Fatalf("request %d: shadow remaining %d, want %d", i, resp.Statuses[0].LimitRemaining, want)
		}
		// The enforced limit counted every request, shadow denial or not.
		if want := uint32(9 - i); resp.Statuses[1].LimitRemaining != want {
			t.Fatalf("request %d: enforced remaining %d, want %d", i, resp.Statuses[1].LimitRemaining, want)
		}
		// Headers come from enforced limits only.
		if h := headerMap(resp); h[ratelimitfield.HeaderXRateLimitLimit] != "10" {
			t.Fatalf("request %d: headers %v, want the enforced limit's", i, h)
		}
	}
	if n := f.obs.count("api api.path_/search shadow_denied store"); n != 3 {
		t.Fatalf("shadow denials observed: %d, want 3", n)
	}
	if n := f.obs.countKey(Allowed, "tenant=acme,user=s"); n != 8 {
		t.Fatalf("tenant=acme,user=s allowed observed %d times, want 8", n)
	}
	// An enforced denial consumes nothing from the shadow limit either.
	g := newFixture(t, Options{}, apiDomain())
	login := desc("path", "/login")
	g.do(request("api", login))
	g.do(request("api", login))
	for range 3 {
		if resp := g.do(request("api", login, search)); sig(resp) != "X:XO" {
			t.Fatalf("exhausted login with search: %s", sig(resp))
		}
	}
	if resp := g.do(request("api", search)); remaining(resp)[0] != 4 {
		t.Fatalf("search after denied requests: remaining %d, want 4", remaining(resp)[0])
	}
}

func TestGlobalShadow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Shadow: true, Headers: ratelimitfield.Draft}, apiDomain())
	login := desc("path", "/login") // 2/min
	user := desc("tenant", "acme", "user", "g")
	for i := range 5 {
		resp := f.do(request("api", login, user))
		if sig(resp) != "O:OO" || resp.ResponseHeadersToAdd != nil {
			t.Fatalf("request %d: %s %v", i, sig(resp), resp.ResponseHeadersToAdd)
		}
	}
	// Every limit is shadow, so each counts as if it alone were enforced:
	// the user limit counted the three requests login would have denied.
	if resp := f.do(request("api", user)); remaining(resp)[0] != 4 {
		t.Fatalf("user remaining %d, want 4 (5 counted + this one)", remaining(resp)[0])
	}
	if n := f.obs.count("api api.path_/login shadow_denied store"); n != 3 {
		t.Fatalf("shadow denials observed: %d", n)
	}
}

func TestLimitOverride(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{DefaultAlgorithm: redlimit.FixedWindow}, apiDomain())
	f.clock.Set(redlimittestT0().Add(100 * time.Millisecond))
	ov := func(kv ...string) *rlpb.RateLimitDescriptor {
		d := desc(kv...)
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typepb.RateLimitUnit_SECOND}
		return d
	}
	// Matches per_ip (fixed window): 2/s instead of 3/min.
	for i, want := range []string{"O:O", "O:O", "X:X"} {
		resp := f.do(request("api", ov("remote_address", "5.5.5.5")))
		if sig(resp) != want {
			t.Fatalf("override %d: %s, want %s", i, sig(resp), want)
		}
		cl := resp.Statuses[0].CurrentLimit
		if cl.RequestsPerUnit != 2 || cl.Unit != pb.RateLimitResponse_RateLimit_SECOND || cl.Name != "" {
			t.Fatalf("current_limit %v", cl)
		}
		if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d != 900*time.Millisecond {
			t.Fatalf("reset %s, want 900ms (fixed window of 1s)", d)
		}
	}
	// No rule matches: counted by the default algorithm (fixed_window here).
	for i, want := range []string{"O:O", "O:O", "X:X"} {
		if resp := f.do(request("api", ov("no_rule", "x"))); sig(resp) != want {
			t.Fatalf("override without a rule %d: %s, want %s", i, sig(resp), want)
		}
	}
	// An unknown domain applies no limit, override or not.
	for range 3 {
		if resp := f.do(request("nope", ov("no_rule", "x"))); sig(resp) != "O:O" || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("unknown domain with override: %v", resp)
		}
	}
	// Unit multiplier: 2 per 3 s.
	d := ov("no_rule", "m")
	d.Limit.UnitMultiplier = wrapperspb.UInt32(3)
	f.do(request("api", d))
	resp := f.do(request("api", d))
	if st := resp.Statuses[0]; st.DurationUntilReset.AsDuration() != 2900*time.Millisecond || st.CurrentLimit.UnitMultiplier.GetValue() != 3 {
		t.Fatalf("override 2 per 3s: %v", st)
	}
}

func TestSameDescriptorTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	user := desc("tenant", "acme", "user", "twice")
	resp := f.do(request("api", user, user))
	if sig(resp) != "O:OO" || !slices.Equal(remaining(resp), []uint32{8, 8}) {
		t.Fatalf("one descriptor twice: %s %v, want both counted: 8 left", sig(resp), remaining(resp))
	}
}

func TestNegativeHits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	d := desc("path", "/login")
	d.IsNegativeHits = true
	for range 5 {
		if resp := f.do(request("api", d)); sig(resp) != "O:O" || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("negative hits: %v", resp)
		}
	}
	if f.store.Len() != 0 {
		t.Fatalf("a refund wrote state")
	}
}

func TestResetPerAlgorithm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	// Sliding log, 2/min: allowed → when the newest request leaves the log;
	// denied → when the oldest does.
	login := request("api", desc("path", "/login"))
	f.do(login)
	f.clock.Advance(10 * time.Second)
	if d := f.do(login).Statuses[0].DurationUntilReset.AsDuration(); d != time.Minute {
		t.Fatalf("sliding log allowed: reset %s, want 1m", d)
	}
	f.clock.Advance(5 * time.Second)
	if d := f.do(login).Statuses[0].DurationUntilReset.AsDuration(); d != 45*time.Second {
		t.Fatalf("sliding log denied: reset %s, want 45s (retry after)", d)
	}
	// Token bucket 4/s burst 2: one token takes 250ms.
	docs := request("api", desc("path", "/docs/x"))
	if d := f.do(docs).Statuses[0].DurationUntilReset.AsDuration(); d != 250*time.Millisecond {
		t.Fatalf("token bucket one token used: reset %s, want 250ms", d)
	}
	f.do(docs)
	resp := f.do(docs)
	if sig(resp) != "X:X" || resp.Statuses[0].DurationUntilReset.AsDuration() != 250*time.Millisecond {
		t.Fatalf("token bucket empty: %s %v, want a retry in 250ms", sig(resp), resp.Statuses[0])
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode      ratelimitfield.Style
		allowed   map[string]string
		denied    map[string]string
		noHeaders bool
	}{
		{mode: ratelimitfield.None, noHeaders: true},
		{mode: ratelimitfield.Draft,
			allowed: map[string]string{ratelimitfield.HeaderRateLimitPolicy: `"acme_user";q=10;w=3600, "api.path_/login";q=2;w=60`, ratelimitfield.HeaderRateLimit: `"api.path_/login";r=0;t=60`},
			denied:  map[string]string{ratelimitfield.HeaderRateLimitPolicy: `"acme_user";q=10;w=3600, "api.path_/login";q=2;w=60`, ratelimitfield.HeaderRateLimit: `"api.path_/login";r=0;t=60`, ratelimitfield.HeaderRetryAfter: "60"}},
		{mode: ratelimitfield.All,
			allowed: map[string]string{ratelimitfield.HeaderRateLimitPolicy: `"acme_user";q=10;w=3600, "api.path_/login";q=2;w=60`, ratelimitfield.HeaderRateLimit: `"api.path_/login";r=0;t=60`,
				ratelimitfield.HeaderXRateLimitLimit: "2", ratelimitfield.HeaderXRateLimitRemaining: "0", ratelimitfield.HeaderXRateLimitReset: "60"},
			denied: map[string]string{ratelimitfield.HeaderRateLimitPolicy: `"acme_user";q=10;w=3600, "api.path_/login";q=2;w=60`, ratelimitfield.HeaderRateLimit: `"api.path_/login";r=0;t=60`,
				ratelimitfield.HeaderXRateLimitLimit: "2", ratelimitfield.HeaderXRateLimitRemaining: "0", ratelimitfield.HeaderXRateLimitReset: "60", ratelimitfield.HeaderRetryAfter: "60"}},
		{mode: ratelimitfield.X,
			allowed: map[string]string{ratelimitfield.HeaderXRateLimitLimit: "2", ratelimitfield.HeaderXRateLimitRemaining: "0", ratelimitfield.HeaderXRateLimitReset: "60"},
			denied:  map[string]string{ratelimitfield.HeaderXRateLimitLimit: "2", ratelimitfield.HeaderXRateLimitRemaining: "0", ratelimitfield.HeaderXRateLimitReset: "60", ratelimitfield.HeaderRetryAfter: "60"}},
		{mode: ratelimitfield.Envoy,
			allowed: map[string]string{ratelimitfield.HeaderRateLimitLimit: "2", ratelimitfield.HeaderRateLimitRemaining: "0", ratelimitfield.HeaderRateLimitReset: "60"},
			denied:  map[string]string{ratelimitfield.HeaderRateLimitLimit: "2", ratelimitfield.HeaderRateLimitRemaining: "0", ratelimitfield.HeaderRateLimitReset: "60", ratelimitfield.HeaderRetryAfter: "60"}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Options{Headers: tc.mode}, apiDomain())
			// The user limit (10/h) has more left, relatively, than login
			// (2/min): the headers describe login.
			req := request("api", desc("tenant", "acme", "user", "h"), desc("path", "/login"))
			f.do(req)
			resp := f.do(req)
			if tc.noHeaders {
				if resp.ResponseHeadersToAdd != nil {
					t.Fatalf("headers while off: %v", resp.ResponseHeadersToAdd)
				}
				return
			}
			if h := headerMap(resp); !mapsEqual(h, tc.allowed) {
				t.Fatalf("allowed: %v, want %v", h, tc.allowed)
			}
			resp = f.do(req)
			if sig(resp) != "X:OX" {
				t.Fatalf("third: %s", sig(resp))
			}
			if h := headerMap(resp); !mapsEqual(h, tc.denied) {
				t.Fatalf("denied: %v, want %v", h, tc.denied)
			}
		})
	}
}

func TestNamedPolicyAndEscaping(t *testing.T) {
	t.Parallel()
	d := domain("h", node("k", "", rule("h.k", `we"ird\name`+"\n", redlimit.PerMinute(3), "minute")))
	f := newFixture(t, Options{Headers: ratelimitfield.Draft}, d)
	h := headerMap(f.do(request("h", desc("k", "v"))))
	if want := `"we\"ird\\name?";r=2;t=120`; h[ratelimitfield.HeaderRateLimit] != want {
		t.Fatalf("RateLimit %q, want %q", h[ratelimitfield.HeaderRateLimit], want)
	}
}

func headerMap(resp *pb.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		m[h.Key] = h.Value
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestDetailedMetric(t *testing.T) {
	t.Parallel()
	r := rule("d.ip", "", redlimit.PerMinute(100), "minute")
	r.DetailedMetric = true
	f := newFixture(t, Options{MaxDetailedSeries: 2}, domain("d", node("ip", "", r)))
	for _, ip := range []string{"1", "2", "1", "3"} {
		f.do(request("d", desc("ip", ip)))
	}
	for key, want := range map[string]int{
		"d d.ip_1 allowed store": 2,
		"d d.ip_2 allowed store": 1,
		"d d.ip allowed store":   1, // past the bound: the rule's path
	} {
		if n := f.obs.count(key); n != want {
			t.Errorf("%q observed %d times, want %d", key, n, want)
		}
	}
}

// Requests decided while the configuration is swapped each see one
// configuration or the other, never none.
func TestHotSwap(t *testing.T) {
	t.Parallel()
	strict := domain("swap", node("k", "", rule("swap.k", "", redlimit.PerMinute(1_000_000), "minute")))
	loose := domain("swap", node("k", "", &config.Rule{Path: "swap.k", Unlimited: true}))
	cfgs := []*config.Config{mustConfig(t, strict), mustConfig(t, loose)}
	f := newFixture(t, Options{}, strict)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				f.svc.SetConfig(cfgs[i%2])
			}
		}
	})
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				resp, err := f.svc.ShouldRateLimit(context.Background(), request("swap", desc("k", fmt.Sprint(w, i))))
				if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
					t.Errorf("during swaps: %v %v", resp, err)
					return
				}
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// A check (hits_addend 0) reports the key as it is, not after a hit: what
// is left and when it is whole again. A fresh key's fixed window resets at
// the window's end, as envoyproxy/ratelimit reports every key; a fresh key
// of the other algorithms is already whole.
// It runs on the memory store and on Redis, on one clock.
func TestCheckReportsWhatIsLeft(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		checkReportsWhatIsLeft(t, newFixture(t, Options{Counting: config.CountingAdmission}))
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		clock := redlimittest.NewClock(redlimittest.T0)
		store, err := redisstore.Open(context.Background(), "redis://"+srv.Addr(), redisstore.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		f := newFixture(t, Options{Counting: config.CountingAdmission, Limiter: store})
		f.clock = clock
		checkReportsWhatIsLeft(t, f)
	})
}

func checkReportsWhatIsLeft(t *testing.T, f *fixture) {
	perMinute := redlimit.PerMinute(1000)
	f.svc.SetConfig(mustConfig(t, domain("chk",
		node("fw", "", rule("chk.fw", "", perMinute.FixedWindow(), "minute")),
		node("tb", "", rule("chk.tb", "", perMinute.TokenBucket(1000), "minute")),
		node("sw", "", rule("chk.sw", "", perMinute, "minute")),
		node("sl", "", rule("chk.sl", "", perMinute.SlidingLog(), "minute")),
	)))
	f.clock.Advance(17 * time.Second)
	windowEnd := time.Minute - time.Duration(f.clock.Now().UnixNano())%time.Minute
	for _, c := range []struct {
		key       string
		freshWant time.Duration
	}{{"fw", windowEnd}, {"tb", 0}, {"sw", 0}, {"sl", 0}} {
		check := func() *pb.RateLimitResponse { return f.do(request("chk", withHits(desc(c.key, "v"), 0))) }
		st := check().Statuses[0]
		if st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 1000 || st.DurationUntilReset.AsDuration() != c.freshWant {
			t.Errorf("%s, fresh key: %s, remaining %d, reset %s; want OK, 1000, %s",
				c.key, st.Code, st.LimitRemaining, st.DurationUntilReset.AsDuration(), c.freshWant)
		}
		spent := f.do(request("chk", withHits(desc(c.key, "v"), 10))).Statuses[0]
		st = check().Statuses[0]
		if st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 990 ||
			st.DurationUntilReset.AsDuration() != spent.DurationUntilReset.AsDuration() {
			t.Errorf("%s, 10 of 1000 spent: %s, remaining %d, reset %s; want OK, 990, %s (as the spending answer said)",
				c.key, st.Code, st.LimitRemaining, st.DurationUntilReset.AsDuration(), spent.DurationUntilReset.AsDuration())
		}
	}
}
