package rls

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// withOverride returns d with the limit override n per unit (times mult
// when not 0).
func withOverride(d *rlpb.RateLimitDescriptor, n uint32, unit typepb.RateLimitUnit, mult uint32) *rlpb.RateLimitDescriptor {
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
	if mult != 0 {
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return d
}

// exampleConfig is examples/config, whose /login rule is 5 an hour per user,
// a sliding log.
func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Load("../../../examples/config")
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Match("example", []config.Entry{{Key: "path", Value: "/login"}, {Key: "user", Value: "u"}}); r == nil ||
		r.Limit != redlimit.PerHour(5).SlidingLog().OnFailure(redlimit.FailClosed) {
		t.Fatalf("the example's login rule is %+v", r)
	}
	return c
}

// loginOverride is the request of finding 8: user's login with a limit
// override of n a year, and a hits_addend of cost.
func loginOverride(user string, n uint32, cost uint64) *pb.RateLimitRequest {
	d := withHits(withOverride(desc("path", "/login", "user", user), n, typepb.RateLimitUnit_YEAR, 0), cost)
	return request("example", d)
}

// heapStats returns the bytes allocated so far and, after a GC, the bytes
// live on the heap.
func heapStats() (total, live uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc, m.HeapAlloc
}

// The request: a limit override of 100,000 a year with a
// hits_addend of 100,000 on the example's /login sliding log (5 an hour),
// for 1,000 users. It made the memory store hold 100,000 log entries per
// user (RSS 28 MB to 817 MB). An override cannot size a sliding log beyond
// its rule's count: each request is InvalidArgument naming the descriptor
// and the rule, and the store holds nothing for it.
func TestOverrideSlidingLogScenario(t *testing.T) {
	f := newFixture(t, Options{})
	f.svc.SetConfig(exampleConfig(t))
	const users = 1_000
	total0, live0 := heapStats()
	for i := range users {
		_, err := f.svc.ShouldRateLimit(context.Background(), loginOverride(fmt.Sprint("user", i), 100_000, 100_000))
		if status.Code(err) != codes.InvalidArgument ||
			!strings.Contains(err.Error(), "descriptor 0: limit override 100000 per 8760h0m0s") ||
			!strings.Contains(err.Error(), "example.path_/login.user") {
			t.Fatalf("user %d: got %v, want InvalidArgument naming descriptor 0 and the rule", i, err)
		}
	}
	total1, live1 := heapStats()
	perRequest := (total1 - total0) / users
	held := int64(live1) - int64(live0)
	t.Logf("%d users: %d bytes allocated per request, %d bytes held in all", users, perRequest, held)
	if perRequest > 16<<10 {
		t.Errorf("%d bytes allocated per request, want at most 16 KiB", perRequest)
	}
	if held > 1<<20 {
		t.Errorf("the service holds %d bytes more after %d refused requests", held, users)
	}
	if n := f.store.Len(); n != 0 {
		t.Errorf("the store holds %d keys", n)
	}
}

// The most the default bounds let a client ask of that rule: an override
// of its own count, 5, for the longest period, a year, at a cost of 5. It
// is allowed once per user, and what the store holds per user stays small.
func TestOverrideSlidingLogAtTheBound(t *testing.T) {
	f := newFixture(t, Options{Counting: config.CountingAdmission}) // the cost is an admission's
	f.svc.SetConfig(exampleConfig(t))
	const users = 1_000
	total0, live0 := heapStats()
	for i := range users {
		user := fmt.Sprint("user", i)
		if resp := f.do(loginOverride(user, 5, 5)); sig(resp) != "O:O" {
			t.Fatalf("user %d: %s", i, sig(resp))
		}
		if resp := f.do(loginOverride(user, 5, 1)); sig(resp) != "X:X" {
			t.Fatalf("user %d, again: %s", i, sig(resp))
		}
	}
	total1, live1 := heapStats()
	perRequest := (total1 - total0) / (2 * users)
	perUser := (int64(live1) - int64(live0)) / users
	t.Logf("%d users: %d bytes allocated per request, %d bytes held per user", users, perRequest, perUser)
	if perRequest > 16<<10 {
		t.Errorf("%d bytes allocated per request, want at most 16 KiB", perRequest)
	}
	if perUser > 2<<10 {
		t.Errorf("%d bytes held per user, want at most 2 KiB", perUser)
	}
	runtime.KeepAlive(f)
}

// Options.Overrides and Options.MaxOverridePeriod: what each policy takes
// and refuses, and the errors that say why.
func TestOverridePolicies(t *testing.T) {
	t.Parallel()
	deny := &config.Rule{Path: "api.blocked", DenyAll: true, Limit: redlimit.Limit{Algorithm: redlimit.SlidingWindow, Period: time.Minute}}
	d := apiDomain()
	d.Descriptors = append(d.Descriptors, node("blocked", "", deny))
	cfg := mustConfig(t, d)
	type tc struct {
		name string
		d    *rlpb.RateLimitDescriptor
		want string // "" for OK, else in the InvalidArgument error
	}
	ip := func(n uint32, u typepb.RateLimitUnit) *rlpb.RateLimitDescriptor {
		return withOverride(desc("remote_address", "1.2.3.4"), n, u, 0) // per_ip: 3/min fixed window
	}
	second, minute, hour, year := typepb.RateLimitUnit_SECOND, typepb.RateLimitUnit_MINUTE, typepb.RateLimitUnit_HOUR, typepb.RateLimitUnit_YEAR
	everywhere := []tc{
		{"beyond a year", withOverride(desc("remote_address", "1.2.3.4"), 1, year, 2), "descriptor 0: limit override 1 per 17520h0m0s: the period is above 8760h0m0s, the longest an override may have"},
		{"beyond the sliding log's count", withOverride(desc("path", "/login"), 3, hour, 0),
			"descriptor 0: limit override 3 per 1h0m0s: a sliding log keeps an entry per request admitted: its count may not exceed rule api.path_/login's 2"},
	}
	for _, p := range []struct {
		policy OverridePolicy
		cases  []tc
	}{
		{OverridesAllow, append([]tc{
			{"raises count and rate", ip(100, second), ""},
			{"lowers", ip(1, minute), ""},
			{"no rule", withOverride(desc("no_rule", "x"), 1_000_000, second, 0), ""},
			{"a year", ip(1, year), ""},
			{"the sliding log's count", withOverride(desc("path", "/login"), 2, second, 0), ""},
			{"a deny-all rule", withOverride(desc("blocked", "x"), 5, second, 0), ""},
		}, everywhere...)},
		{OverridesNoRaise, append([]tc{
			{"raises the count", ip(4, hour), "descriptor 0: limit override 4 per 1h0m0s raises rule api.remote_address (3 per 1m0s): this service takes overrides that lower a rule's limit only"},
			{"raises the rate", ip(3, second), "limit override 3 per 1s raises rule api.remote_address"},
			{"lowers the rate", ip(3, hour), ""},
			{"lowers both", ip(1, minute), ""},
			{"the same", ip(3, minute), ""},
			{"token bucket: burst 2, 4/s", withOverride(desc("path", "/docs/x"), 3, second, 0), "raises rule api.path_/docs/*"},
			{"token bucket: lower", withOverride(desc("path", "/docs/x"), 2, second, 0), ""},
			{"an unlimited rule", withOverride(desc("remote_address", "10.0.0.1"), 1_000_000, second, 0), ""},
			{"no rule", withOverride(desc("no_rule", "x"), 1_000_000, second, 0), ""},
			{"a deny-all rule", withOverride(desc("blocked", "x"), 1, year, 0), "raises rule api.blocked (deny all)"},
		}, everywhere...)},
		{OverridesRefuse, []tc{
			{"lowers", ip(1, minute), "descriptor 0: limit overrides are not accepted by this service"},
			{"no rule", withOverride(desc("no_rule", "x"), 1, second, 0), "descriptor 0: limit overrides are not accepted"},
		}},
	} {
		f := newFixture(t, Options{Overrides: p.policy})
		f.svc.SetConfig(cfg)
		for _, c := range p.cases {
			t.Run(p.policy.String()+"/"+c.name, func(t *testing.T) {
				_, err := f.svc.Decide(context.Background(), request("api", desc("k", "v"), c.d))
				msg := strings.ReplaceAll(c.want, "descriptor 0", "descriptor 1")
				switch {
				case c.want == "" && err != nil:
					t.Errorf("got %v, want no error", err)
				case c.want != "" && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), msg)):
					t.Errorf("got  %v\nwant ErrInvalidRequest with %q", err, msg)
				}
			})
		}
	}

	// A shorter cap on the period.
	f := newFixture(t, Options{MaxOverridePeriod: time.Hour})
	f.svc.SetConfig(cfg)
	if _, err := f.svc.Decide(context.Background(), request("api", ip(1, hour))); err != nil {
		t.Errorf("an hour: %v", err)
	}
	if _, err := f.svc.Decide(context.Background(), request("api", withOverride(desc("no_rule", "x"), 1, minute, 61))); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("61 minutes: %v", err)
	}
}

func TestParseOverridePolicy(t *testing.T) {
	t.Parallel()
	for _, p := range []OverridePolicy{OverridesAllow, OverridesNoRaise, OverridesRefuse} {
		text, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q OverridePolicy
		if err := q.UnmarshalText(text); err != nil || q != p {
			t.Errorf("%s: round trip gave %v, %v", text, q, err)
		}
	}
	var q OverridePolicy
	if err := q.UnmarshalText([]byte("sometimes")); err == nil {
		t.Error("no error for an unknown policy")
	}
	f := newFixture(t, Options{})
	for _, o := range []Options{
		{Limiter: f.store, Overrides: 9},
		{Limiter: f.store, MaxOverridePeriod: -time.Second},
		{Limiter: f.store, DefaultAlgorithm: redlimit.SlidingLog},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}

// Under no-raise, an override of another period (or of a rule whose
// threshold is shared) may not start from a full allowance of its own: the
// rule's own limit is decided with it. Without that, a spent 3/min rule
// admitted 3 more through each of five longer periods.
func TestNoRaiseOverridePeriods(t *testing.T) {
	t.Parallel()
	d := apiDomain()
	shared := rule("api.tenant", "per_tenant", redlimit.PerMinute(3).FixedWindow(), "minute")
	d.Descriptors = append(d.Descriptors, &config.Descriptor{Key: "tenant", Value: "t*", ShareThreshold: true, Rule: shared})
	f := newFixture(t, Options{Overrides: OverridesNoRaise}, d)
	ip := func(n uint32, u typepb.RateLimitUnit, mult uint32) *pb.RateLimitRequest {
		return request("api", withOverride(desc("remote_address", "1.2.3.4"), n, u, mult))
	}
	for range 3 {
		if got := sig(f.do(request("api", desc("remote_address", "1.2.3.4")))); got != "O:O" {
			t.Fatalf("the rule's own 3: %s", got)
		}
	}
	for _, c := range []struct {
		unit typepb.RateLimitUnit
		mult uint32
	}{{typepb.RateLimitUnit_HOUR, 0}, {typepb.RateLimitUnit_DAY, 0}, {typepb.RateLimitUnit_MONTH, 0},
		{typepb.RateLimitUnit_YEAR, 0}, {typepb.RateLimitUnit_MINUTE, 2}, {typepb.RateLimitUnit_MINUTE, 0}} {
		if got := sig(f.do(ip(3, c.unit, c.mult))); got != "X:X" {
			t.Errorf("override 3 per %s x%d on a spent 3/min rule: %s, want X:X", c.unit, c.mult, got)
		}
	}
	// Another client, on its own: the override still holds it to 2 a day.
	for i, want := range []string{"O:O", "O:O", "X:X"} {
		if got := sig(f.do(request("api", withOverride(desc("remote_address", "5.6.7.8"), 2, typepb.RateLimitUnit_DAY, 0)))); got != want {
			t.Errorf("override 2/day, request %d: %s, want %s", i, got, want)
		}
	}
	// Each such override is two limits of one decision, which takes at most
	// redlimit.MaxRequests: beyond, the request is refused, not failed.
	for _, c := range []struct {
		n    int
		want error
	}{{redlimit.MaxRequests / 2, nil}, {redlimit.MaxRequests/2 + 1, ErrInvalidRequest}} {
		var descs []*rlpb.RateLimitDescriptor
		for i := range c.n {
			descs = append(descs, withOverride(desc("remote_address", fmt.Sprint("9.9.9.", i)), 1, typepb.RateLimitUnit_HOUR, 0))
		}
		if _, err := f.svc.Decide(context.Background(), request("api", descs...)); !errors.Is(err, c.want) {
			t.Errorf("%d overrides: %v, want %v", c.n, err, c.want)
		}
	}
	// A shared threshold: t1 and t2 share 3/min; overrides of each value
	// of the same period do not make it 3 each.
	for i, want := range []string{"O:O", "O:O", "O:O", "X:X", "X:X"} {
		tenant := fmt.Sprint("t", i%2+1)
		r := request("api", withOverride(desc("tenant", tenant), 3, typepb.RateLimitUnit_MINUTE, 0))
		if got := sig(f.do(r)); got != want {
			t.Errorf("shared threshold, %s, request %d: %s, want %s", tenant, i, got, want)
		}
	}
}
