package config

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/redlimit/redlimit"
)

// matchNamed matches entries in domain of c and returns the rule with the
// key value of each level and the metric name, or fails the test.
func matchNamed(t *testing.T, c *Config, domain string, entries []Entry) (r *Rule, key []string, metric string) {
	t.Helper()
	r, path := c.MatchPath(domain, entries, nil)
	if r == nil {
		return nil, nil, ""
	}
	if len(path) != len(entries) {
		t.Fatalf("%s %v: a path of %d descriptors for %d entries", domain, entries, len(path), len(entries))
	}
	if got := c.Match(domain, entries); got != r {
		t.Fatalf("%s %v: Match gives %v, MatchPath %v", domain, entries, got, r)
	}
	for i, d := range path {
		key = append(key, d.KeyValue(entries[i].Value))
	}
	return r, key, r.MetricName(entries, path)
}

// TestEnvoyReadme walks through the configurations of envoyproxy/ratelimit's
// README with fixtures of the same features (testdata/envoy): each loads
// unchanged, as one directory, and matches, keys and names its metrics as
// the README documents. TestEnvoyReadme in internal/rls decides requests
// with them.
func TestEnvoyReadme(t *testing.T) {
	c := mustLoad(t, "testdata/envoy")
	if len(c.Domains) != 13 {
		t.Fatalf("%d domains: %v", len(c.Domains), c.Files)
	}
	for _, r := range c.Rules() {
		if !r.Unlimited && (r.Limit.Algorithm != redlimit.SlidingWindow || r.UnitMultiplier != 1 || r.Counting != CountingDefault) {
			t.Errorf("%s: %+v, want envoy's settings: sliding_window (redlimit's default), one unit, the service's counting", r.Path, r)
		}
	}

	for _, tc := range []struct {
		name    string
		domain  string
		entries []Entry
		path    string   // the rule's, "" for none
		key     []string // each level's value in the limit's key; nil: the request's values
		metric  string   // "" for the rule's path
	}{
		// 1: two values of one key; another value, or a deeper
		// descriptor, has no limit.
		{"1 orders", "db_qps", e("table", "orders"), "db_qps.table_orders", nil, ""},
		{"1 invoices", "db_qps", e("table", "invoices"), "db_qps.table_invoices", nil, ""},
		{"1 other value", "db_qps", e("table", "users"), "", nil, ""},
		{"1 deeper", "db_qps", e("table", "orders", "op", "read"), "", nil, ""},

		// 2: the nested rule for (campaign promo, phone), the top-level
		// one for (phone): each phone number its own limit.
		{"2 nested", "sms", e("campaign", "promo", "phone", "2061111111"), "sms.campaign_promo.phone", nil, ""},
		{"2 top", "sms", e("phone", "2061111111"), "sms.phone", nil, ""},
		{"2 placeholder", "sms", e("campaign", "promo"), "", nil, ""},
		{"2 other campaign", "sms", e("campaign", "news", "phone", "2061111111"), "", nil, ""},

		// 3: key_value before the key alone.
		{"3 any ip", "edge", e("client_ip", "203.0.113.1"), "edge.client_ip", nil, ""},
		{"3 blocked", "edge", e("client_ip", "203.0.113.9"), "edge.client_ip_203.0.113.9", nil, ""},

		// 4: a rule applies at its depth only.
		{"4 flat, one entry", "depth_flat", e("tenant", "acme"), "depth_flat.tenant_acme", nil, ""},
		{"4 flat, two entries", "depth_flat", e("tenant", "acme", "user", "u1"), "", nil, ""},
		{"4 nested, two entries", "depth_nested", e("tenant", "acme", "user", "u1"), "depth_nested.tenant_acme.user", nil, ""},
		{"4 nested, one entry", "depth_nested", e("tenant", "acme"), "", nil, ""},

		// 5: unlimited.
		{"5 unlimited", "backends", e("vault", "kv"), "backends.vault", nil, ""},
		{"5 limited", "backends", e("s3", "b1"), "backends.s3", nil, ""},

		// 6: shadow mode on one value.
		{"6 shadow", "checkout", e("service", "pay", "client", "beta"), "checkout.service.client_beta", nil, ""},
		{"6 enforced", "checkout", e("service", "pay", "client", "stable"), "checkout.service.client_stable", nil, ""},

		// 7: both rules match their own descriptors.
		{"7 named", "reports", e("plan", "free", "account", "a42"), "reports.plan_free.account_a42", nil, ""},
		{"7 replacing", "reports", e("plan", "trial", "account", "a42"), "reports.plan_trial.account_a42", nil, ""},

		// 8: detailed_metric names the request's value; the exact
		// value's rule keeps its own name.
		{"8 detailed", "uploads", e("bucket", "unspecified_value"), "uploads.bucket", nil, "uploads.bucket_unspecified_value"},
		{"8 detailed, another", "uploads", e("bucket", "unspecified_value2"), "uploads.bucket", nil, "uploads.bucket_unspecified_value2"},
		{"8 exact", "uploads", e("bucket", "public"), "uploads.bucket_public", nil, ""},

		// 9: wildcards anywhere in a value.
		{"9 trailing", "paths", e("asset", "img-42"), "paths.asset_img-*", nil, ""},
		{"9 trailing, empty", "paths", e("asset", "img-"), "paths.asset_img-*", nil, ""},
		{"9 middle", "paths", e("path", "/v1/reports/export"), "paths.path_/v1/*/export", nil, ""},
		{"9 middle, no suffix", "paths", e("path", "/v1/reports/other"), "", nil, ""},
		{"9 several", "paths", e("route", "/orgs/o1/repos/r1/pulls"), "paths.route_/orgs/*/repos/*/pulls", nil, ""},
		{"9 several, one missing", "paths", e("route", "/orgs/o1/pulls"), "", nil, ""},

		// 10: value_to_metric names the request's values, the full value
		// where a wildcard matched; a level without it keeps its key.
		{"10 key alone", "graphql", e("client", "ios", "operation", "GetFeed", "viewer", "v1"),
			"graphql.client.operation.viewer", nil, "graphql.client_ios.operation_GetFeed.viewer"},
		{"10 another", "graphql", e("client", "web", "operation", "Search", "viewer", "v2"),
			"graphql.client.operation.viewer", nil, "graphql.client_web.operation_Search.viewer"},
		{"10 wildcard", "graphql", e("schema", "public", "field", "userProfile", "viewer", "v1"),
			"graphql.schema.field_user*.viewer", nil, "graphql.schema_public.field_userProfile.viewer"},

		// 11: share_threshold keys every match by the pattern; without it,
		// by the request's value. With value_to_metric the metric names
		// the pattern, not the value.
		{"11 shared", "storage", e("object", "docs/a.pdf"), "storage.object_docs/*", []string{"docs/*"}, ""},
		{"11 shared, another", "storage", e("object", "docs/b.csv"), "storage.object_docs/*", []string{"docs/*"}, ""},
		{"11 not shared", "storage", e("object", "tmp/a.pdf"), "storage.object_tmp/*", nil, ""},
		{"11 shared, deeper rule", "storage", e("prefix", "media/v1", "verb", "GET"),
			"storage.prefix_media/*.verb", []string{"media/*", "GET"}, ""},

		// example.yaml: quota rules with metadata.
		{"quota east", "llm", e("backend", "gpu_east"), "llm.backend_gpu_east", nil, ""},
		{"quota west", "llm", e("backend", "gpu_west"), "llm.backend_gpu_west", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, key, metric := matchNamed(t, c, tc.domain, tc.entries)
			if r == nil {
				if tc.path != "" {
					t.Fatalf("no rule, want %s", tc.path)
				}
				return
			}
			if r.Path != tc.path {
				t.Fatalf("rule %s, want %q", r.Path, tc.path)
			}
			want := tc.key
			if want == nil {
				for _, en := range tc.entries {
					want = append(want, en.Value)
				}
			}
			if strings.Join(key, "|") != strings.Join(want, "|") {
				t.Errorf("key values %q, want %q", key, want)
			}
			wantMetric := tc.metric
			if wantMetric == "" {
				wantMetric = r.Path
			}
			if metric != wantMetric {
				t.Errorf("metric %q, want %q", metric, wantMetric)
			}
		})
	}

	// The rules' own settings.
	rule := func(domain string, entries []Entry) *Rule {
		t.Helper()
		r := c.Match(domain, entries)
		if r == nil {
			t.Fatalf("%s %v: no rule", domain, entries)
		}
		return r
	}
	if r := rule("edge", e("client_ip", "203.0.113.9")); !r.DenyAll {
		t.Errorf("3: %+v, want a block", r)
	}
	if r := rule("backends", e("vault", "kv")); !r.Unlimited {
		t.Errorf("5: %+v, want unlimited", r)
	}
	if a, b := rule("checkout", e("service", "s", "client", "beta")), rule("checkout", e("service", "s", "client", "stable")); !a.Shadow || b.Shadow {
		t.Errorf("6: shadow %v and %v, want true and false", a.Shadow, b.Shadow)
	}
	if r := rule("reports", e("plan", "trial", "account", "a42")); len(r.Replaces) != 1 || r.Replaces[0] != "free_a42" {
		t.Errorf("7: replaces %q", r.Replaces)
	}
	east, west := rule("llm", e("backend", "gpu_east")), rule("llm", e("backend", "gpu_west"))
	wantEast, _ := structpb.NewStruct(map[string]any{"upstream": map[string]any{"name": "gpu_east", "weight": 2}})
	if !east.QuotaMode || !west.QuotaMode || !proto.Equal(east.Metadata, wantEast) || west.Metadata.GetFields()["upstream"].GetStructValue().GetFields()["zone"].GetStringValue() != "west" {
		t.Errorf("quota rules: %+v %v, %+v %v", east, east.Metadata, west, west.Metadata)
	}
	if r := rule("llm", e("user", "u1")); r.QuotaMode || r.Metadata != nil {
		t.Errorf("plain rule: %+v", r)
	}
}

// TestMergeDomains loads one domain from two files with MergeDomains, as
// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: one tree, each file's rules
// with its own defaults, replaces across the files; without it, an error.
func TestMergeDomains(t *testing.T) {
	const dir = "testdata/envoy/merged"
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `domain "catalog" is already defined in `+dir+"/10_read.yaml") {
		t.Fatalf("without merging: %v", err)
	}
	c, err := Loader{MergeDomains: true}.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains["catalog"]
	files := []string{dir + "/10_read.yaml", dir + "/20_write.yaml"}
	if d == nil || d.File != files[0] || strings.Join(d.Files, ",") != strings.Join(files, ",") || strings.Join(c.Files, ",") != strings.Join(files, ",") {
		t.Fatalf("domain %+v, files %q", d, c.Files)
	}
	for _, tc := range []struct {
		entries []Entry
		path    string
		file    string
		alg     redlimit.Algorithm
	}{
		{e("verb", "GET"), "catalog.verb_GET", files[0], redlimit.SlidingWindow},
		{e("verb", "POST"), "catalog.verb_POST", files[1], redlimit.FixedWindow},
		{e("admin", "x", "verb", "GET"), "catalog.admin.verb_GET", files[1], redlimit.FixedWindow},
	} {
		r := c.Match("catalog", tc.entries)
		if r == nil || r.Path != tc.path || r.File != tc.file || r.Limit.Algorithm != tc.alg {
			t.Errorf("%v: %+v, want %s from %s by %s", tc.entries, r, tc.path, tc.file, tc.alg)
		}
	}
	if r := c.Match("catalog", e("admin", "x", "verb", "GET")); len(r.Replaces) != 1 || r.Replaces[0] != "reads" {
		t.Errorf("replaces across files: %q", r.Replaces)
	}

	// A descriptor of one name in two files, and a replaces name no file
	// defines, are errors naming the files.
	tmp := t.TempDir()
	write(t, tmp+"/a.yaml", "domain: catalog\ndescriptors:\n  - key: verb\n    value: GET\n    rate_limit: {name: reads, unit: second, requests_per_unit: 3}\n")
	write(t, tmp+"/b.yaml", "domain: catalog\ndescriptors:\n  - key: verb\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: verb\n    value: GET\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: writes}]}\n")
	_, err = Loader{MergeDomains: true}.Load(context.Background(), tmp)
	want := []string{
		tmp + `/b.yaml:5: descriptors[1]: descriptor key "verb" value "GET" has the path "catalog.verb_GET" of descriptor key "verb" value "GET" in ` + tmp + `/a.yaml at line 3 (the files of domain "catalog" are merged)`,
		tmp + `/b.yaml:7: descriptors[1].rate_limit.replaces[0].name: no rule of domain "catalog" is named "writes"`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") || !errors.Is(err, ErrInvalid) {
		t.Errorf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// write writes data to the file name, or fails the test.
func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
