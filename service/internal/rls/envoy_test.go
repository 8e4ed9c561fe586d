package rls

import (
	"context"
	"math"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/service/internal/config"
)

// envoyFixtures is where internal/config keeps the fixtures of the
// features of envoyproxy/ratelimit's README configurations.
const envoyFixtures = "../config/testdata/envoy"

// step is a request and what the service answers it.
type step struct {
	name  string
	req   *pb.RateLimitRequest
	times int    // how many times the request is made (0: once); each gets want
	want  string // sig of the response
}

// run makes every step's request and checks its answer.
func (f *fixture) run(steps []step) {
	f.t.Helper()
	for _, s := range steps {
		for i := range max(1, s.times) {
			if got := sig(f.do(s.req)); got != s.want {
				f.t.Fatalf("%s, request %d: %s, want %s", s.name, i+1, got, s.want)
			}
		}
	}
}

// TestEnvoyReadme walks through the configurations of envoyproxy/ratelimit's
// README, with fixtures of the same features, and checks that the service
// decides as the README documents; TestEnvoyReadme in internal/config
// checks the matching, the keys and the metric names.
//
// Where redlimit counts differently, by design, the step says so: a
// request that one descriptor denies consumes nothing of the others
// (envoyproxy/ratelimit counts them all).
func TestEnvoyReadme(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(envoyFixtures)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{DynamicMetadata: true})
	f.svc.SetConfig(cfg)
	r := request

	t.Run("1 values", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"orders", r("db_qps", desc("table", "orders")), 3, "O:O"},
			{"orders over", r("db_qps", desc("table", "orders")), 0, "X:X"},
			{"invoices, its own limit", r("db_qps", desc("table", "invoices")), 3, "O:O"},
			{"another value: no limit", r("db_qps", desc("table", "users")), 5, "O:O"},
		})
	})
	t.Run("2 nested, several descriptors", func(t *testing.T) {
		f.t = t
		promo := func() *rlpb.RateLimitDescriptor { return desc("campaign", "promo", "phone", "2061111111") }
		phone := func() *rlpb.RateLimitDescriptor { return desc("phone", "2061111111") }
		f.run([]step{
			{"both", r("sms", promo(), phone()), 2, "O:OO"},
			// The promo limit is spent: the request is over the limit (a
			// logical OR) and, in redlimit, consumes nothing of the phone's.
			{"promo spent", r("sms", promo(), phone()), 2, "X:XO"},
			{"phone alone", r("sms", phone()), 2, "O:O"},
			{"phone spent", r("sms", phone()), 0, "X:X"},
			{"another phone", r("sms", desc("phone", "2062222222")), 0, "O:O"},
		})
	})
	t.Run("3 block", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"any address", r("edge", desc("client_ip", "203.0.113.1")), 5, "O:O"},
			{"any address over", r("edge", desc("client_ip", "203.0.113.1")), 0, "X:X"},
			{"the blocked address, from its first request", r("edge", desc("client_ip", "203.0.113.9")), 3, "X:X"},
		})
	})
	t.Run("4 depth", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"flat rule, one entry", r("depth_flat", desc("tenant", "acme")), 2, "O:O"},
			{"flat rule, one entry, over", r("depth_flat", desc("tenant", "acme")), 0, "X:X"},
			{"flat rule, two entries: no match", r("depth_flat", desc("tenant", "acme", "user", "u1")), 5, "O:O"},
			{"nested rule, two entries", r("depth_nested", desc("tenant", "acme", "user", "u1")), 2, "O:O"},
			{"nested rule, over", r("depth_nested", desc("tenant", "acme", "user", "u1")), 0, "X:X"},
			{"nested rule, one entry: no match", r("depth_nested", desc("tenant", "acme")), 5, "O:O"},
		})
	})
	t.Run("5 unlimited", func(t *testing.T) {
		f.t = t
		keys := f.store.Len()
		for range 5 {
			if resp := f.do(r("backends", desc("vault", "kv"))); sig(resp) != "O:O" || resp.Statuses[0].LimitRemaining != math.MaxUint32 {
				t.Fatalf("unlimited: %s %v, want OK with MaxUint32 remaining", sig(resp), remaining(resp))
			}
		}
		if f.store.Len() != keys {
			t.Errorf("an unlimited descriptor made %d keys", f.store.Len()-keys)
		}
		f.run([]step{
			{"limited", r("backends", desc("s3", "b1")), 2, "O:O"},
			{"limited, over", r("backends", desc("s3", "b1")), 0, "X:X"},
		})
	})
	t.Run("6 shadow", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"beta: never limited", r("checkout", desc("service", "pay", "client", "beta")), 5, "O:O"},
			{"stable", r("checkout", desc("service", "pay", "client", "stable")), 3, "O:O"},
			{"stable, over", r("checkout", desc("service", "pay", "client", "stable")), 0, "X:X"},
		})
		if n := f.obs.count("checkout checkout.service.client_beta shadow_denied store"); n != 3 {
			t.Errorf("beta: %d shadow denials, want 3, the statistics of the breaches", n)
		}
	})
	t.Run("7 replaces", func(t *testing.T) {
		f.t = t
		free := func() *rlpb.RateLimitDescriptor { return desc("plan", "free", "account", "a42") }
		trial := func() *rlpb.RateLimitDescriptor { return desc("plan", "trial", "account", "a42") }
		f.run([]step{
			// Both match: the replaced rule is not evaluated (OK, no limit).
			{"both: the trial's 4", r("reports", free(), trial()), 4, "O:OO"},
			{"both, over", r("reports", free(), trial()), 0, "X:OX"},
			// ...and its limit was not changed.
			{"free alone: its own 2, untouched", r("reports", free()), 2, "O:O"},
			{"free alone, over", r("reports", free()), 0, "X:X"},
		})
	})
	t.Run("8 detailed_metric", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"unspecified", r("uploads", desc("bucket", "unspecified_value")), 0, "O:O"},
			{"unspecified 2", r("uploads", desc("bucket", "unspecified_value2")), 0, "O:O"},
			{"specified", r("uploads", desc("bucket", "public")), 0, "O:O"},
		})
		for _, l := range []string{"uploads.bucket_unspecified_value", "uploads.bucket_unspecified_value2", "uploads.bucket_public"} {
			if n := f.obs.count("uploads " + l + " allowed store"); n != 1 {
				t.Errorf("metric %s counted %d, want 1", l, n)
			}
		}
	})
	t.Run("9 wildcards", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"trailing", r("paths", desc("asset", "img-1")), 2, "O:O"},
			{"trailing, over", r("paths", desc("asset", "img-1")), 0, "X:X"},
			{"another match: its own limit", r("paths", desc("asset", "img-2")), 0, "O:O"},
			{"middle", r("paths", desc("path", "/v1/users/export")), 2, "O:O"},
			{"middle, over", r("paths", desc("path", "/v1/users/export")), 0, "X:X"},
			{"middle, other suffix: no match", r("paths", desc("path", "/v1/users/other")), 3, "O:O"},
			{"several", r("paths", desc("route", "/orgs/o/repos/r/pulls")), 2, "O:O"},
			{"several, over", r("paths", desc("route", "/orgs/o/repos/r/pulls")), 0, "X:X"},
		})
	})
	t.Run("10 value_to_metric", func(t *testing.T) {
		f.t = t
		f.run([]step{
			{"ios", r("graphql", desc("client", "ios", "operation", "GetFeed", "viewer", "123")), 0, "O:O"},
			{"web", r("graphql", desc("client", "web", "operation", "Search", "viewer", "456")), 0, "O:O"},
			{"wildcard", r("graphql", desc("schema", "public", "field", "userProfile", "viewer", "123")), 0, "O:O"},
		})
		for _, l := range []string{"graphql.client_ios.operation_GetFeed.viewer", "graphql.client_web.operation_Search.viewer",
			"graphql.schema_public.field_userProfile.viewer"} {
			if n := f.obs.count("graphql " + l + " allowed store"); n != 1 {
				t.Errorf("metric %s counted %d, want 1", l, n)
			}
		}
	})
	t.Run("11 share_threshold", func(t *testing.T) {
		f.t = t
		obj := func(v string) *pb.RateLimitRequest { return r("storage", desc("object", v)) }
		f.run([]step{
			{"docs/a.pdf", obj("docs/a.pdf"), 2, "O:O"},
			{"docs/b.csv, the same limit", obj("docs/b.csv"), 2, "O:O"},
			{"docs/c.txt: the shared 4 are spent", obj("docs/c.txt"), 0, "X:X"},
			{"tmp/a.pdf", obj("tmp/a.pdf"), 4, "O:O"},
			{"tmp/a.pdf over", obj("tmp/a.pdf"), 0, "X:X"},
			{"tmp/b.csv: its own limit", obj("tmp/b.csv"), 4, "O:O"},
			{"media/v1, deeper rule", r("storage", desc("prefix", "media/v1", "verb", "GET")), 2, "O:O"},
			{"media/v2 shares it", r("storage", desc("prefix", "media/v2", "verb", "GET")), 0, "O:O"},
			{"media/v3, over", r("storage", desc("prefix", "media/v3", "verb", "GET")), 0, "X:X"},
		})
		if n := f.obs.count("storage storage.prefix_media/*.verb allowed store"); n != 3 {
			t.Errorf("the shared rule's metric, with value_to_metric, names the pattern: %d, want 3", n)
		}
	})
	t.Run("example.yaml quota_mode and metadata", func(t *testing.T) {
		f.t = t
		check := func() *pb.RateLimitRequest {
			return r("llm", withHits(desc("backend", "gpu_east"), 0), withHits(desc("backend", "gpu_west"), 0))
		}
		upstream := func(resp *pb.RateLimitResponse) string {
			u := resp.DynamicMetadata.GetFields()["metadata"].GetStructValue().GetFields()["upstream"].GetStructValue()
			var parts []string
			for _, k := range []string{"name", "weight", "zone"} {
				if v, ok := u.GetFields()[k]; ok {
					b, _ := v.MarshalJSON()
					parts = append(parts, k+"="+string(b))
				}
			}
			return strings.Join(parts, " ")
		}
		// Both have room: the first's metadata wins where both set a field.
		if resp := f.do(check()); sig(resp) != "O:OO" || upstream(resp) != `name="gpu_east" weight=2 zone="west"` {
			t.Fatalf("both with room: %s, %s", sig(resp), upstream(resp))
		}
		f.do(r("llm", desc("backend", "gpu_east"))) // served by east
		// East is spent: OVER_LIMIT in its status, the request passes for
		// west, whose metadata alone is returned.
		if resp := f.do(check()); sig(resp) != "O:XO" || upstream(resp) != `name="gpu_west" zone="west"` {
			t.Fatalf("east spent: %s, %s", sig(resp), upstream(resp))
		}
		f.do(r("llm", desc("backend", "gpu_west")))
		f.do(r("llm", desc("backend", "gpu_west")))
		// Both spent: the request is over the limit, with no metadata.
		resp := f.do(check())
		if sig(resp) != "X:XX" || resp.DynamicMetadata.GetFields()["metadata"] != nil {
			t.Fatalf("both spent: %s, %v", sig(resp), resp.DynamicMetadata)
		}
		if got := resp.DynamicMetadata.GetFields()["domain"].GetStringValue(); got != "llm" {
			t.Errorf("dynamic metadata domain %q", got)
		}
	})
	t.Run("MERGE_DOMAIN_CONFIG", func(t *testing.T) {
		merged, err := config.Loader{MergeDomains: true}.Load(context.Background(), envoyFixtures+"/merged")
		if err != nil {
			t.Fatal(err)
		}
		g := newFixture(t, Options{})
		g.svc.SetConfig(merged)
		get := func() *rlpb.RateLimitDescriptor { return desc("verb", "GET") }
		admin := func() *rlpb.RateLimitDescriptor { return desc("admin", "x", "verb", "GET") }
		g.run([]step{
			{"reads", r("catalog", get()), 3, "O:O"},
			{"reads over", r("catalog", get()), 0, "X:X"},
			{"the other file's rule replaces it", r("catalog", get(), admin()), 10, "O:OO"},
			{"the other file's rule, over (fixed_window, its file's)", r("catalog", get(), admin()), 0, "X:OX"},
			{"writes", r("catalog", desc("verb", "POST")), 0, "O:O"},
			{"writes over", r("catalog", desc("verb", "POST")), 0, "X:X"},
		})
	})
}
