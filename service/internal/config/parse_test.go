package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// mustLoad loads path or ends the test.
func mustLoad(t testing.TB, path string) *Config {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return c
}

// TestParseFull checks every rule of a file that uses every key.
func TestParseFull(t *testing.T) {
	c := mustLoad(t, "testdata/full.yaml")
	const file = "testdata/full.yaml"
	want := []RuleView{
		{Domain: "api", Path: "api.remote_address", Name: "per_ip", File: file, Line: 7,
			Unit: "minute", RequestsPerUnit: 100, Period: "1m0s", Algorithm: "sliding_log", FailurePolicy: "fail_open"},
		{Domain: "api", Path: "api.remote_address_10.0.0.1", File: file, Line: 14,
			Unit: "second", RequestsPerUnit: 1000, Period: "1s", Algorithm: "sliding_window", FailurePolicy: "local"},
		{Domain: "api", Path: "api.tenant_acme.path_/login", Name: "acme_login", File: file, Line: 26,
			Unit: "hour", RequestsPerUnit: 20, Period: "1h0m0s", Algorithm: "token_bucket", Burst: 5, FailurePolicy: "fail_closed"},
		{Domain: "api", Path: "api.tenant_acme.path_/api/*", File: file, Line: 35,
			Unit: "second", RequestsPerUnit: 50, Period: "1s", Algorithm: "token_bucket", Burst: 50, FailurePolicy: "fail_open"},
		{Domain: "api", Path: "api.tenant_acme.path_/users/*/avatar", File: file, Line: 41,
			Unit: "day", RequestsPerUnit: 3, Period: "24h0m0s", Algorithm: "sliding_log", FailurePolicy: "fail_open", ShadowMode: true},
		{Domain: "api", Path: "api.tenant_acme.path.method_GET", File: file, Line: 49,
			Unit: "week", RequestsPerUnit: 7, Period: "168h0m0s", Algorithm: "fixed_window", FailurePolicy: "fail_open", DetailedMetric: true},
		{Domain: "api", Path: "api.tenant_acme.path.method", File: file, Line: 56,
			Unit: "month", RequestsPerUnit: 30, Period: "720h0m0s", Algorithm: "sliding_log", FailurePolicy: "fail_open"},
		{Domain: "api", Path: "api.health", File: file, Line: 67, Unlimited: true},
		{Domain: "api", Path: "api.api_key_500", File: file, Line: 73,
			Unit: "year", RequestsPerUnit: 4294967295, Period: "8760h0m0s", Algorithm: "sliding_window", FailurePolicy: "fail_open",
			Replaces: []string{"per_ip", "acme_login"}},
		{Domain: "api", Path: "api.status_429", File: file, Line: 86,
			Unit: "minute", RequestsPerUnit: 60, Period: "1m0s", Algorithm: "fixed_window", FailurePolicy: "fail_open"},
		{Domain: "api", Path: "api.status_503", File: file, Line: 94,
			Unit: "minute", RequestsPerUnit: 6, Period: "1m0s", Algorithm: "fixed_window", FailurePolicy: "fail_open"},
		{Domain: "api", Path: "api.status_true", File: file, Line: 100,
			Unit: "minute", RequestsPerUnit: 60, Period: "1m0s", Algorithm: "fixed_window", FailurePolicy: "fail_open"},
	}
	rules := c.Rules()
	if len(rules) != len(want) {
		t.Fatalf("got %d rules, want %d", len(rules), len(want))
	}
	for i, r := range rules {
		if got := r.View(); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("rule %d:\n got %+v\nwant %+v", i, got, want[i])
		}
		if !r.Unlimited {
			if err := r.Limit.Validate(); err != nil {
				t.Errorf("rule %s: invalid limit: %v", r.Path, err)
			}
		}
	}

	// The limits as the service uses them.
	limits := map[string]redlimit.Limit{
		"api.remote_address":          redlimit.PerMinute(100).SlidingLog().OnFailure(redlimit.FailOpen),
		"api.tenant_acme.path_/login": redlimit.PerHour(20).TokenBucket(5).OnFailure(redlimit.FailClosed),
		"api.tenant_acme.path_/api/*": redlimit.PerSecond(50).TokenBucket(50).OnFailure(redlimit.FailOpen),
		"api.tenant_acme.path.method": redlimit.Per(30, 30*24*time.Hour).SlidingLog().OnFailure(redlimit.FailOpen),
	}
	for _, r := range rules {
		if l, ok := limits[r.Path]; ok && r.Limit != l {
			t.Errorf("%s: limit %+v, want %+v", r.Path, r.Limit, l)
		}
	}
	if r := rules[7]; r.Limit != (redlimit.Limit{}) || r.Unit != "" {
		t.Errorf("unlimited rule has limit %+v unit %q, want none", r.Limit, r.Unit)
	}

	// The tree.
	d := c.Domains["api"]
	if d.Name != "api" || d.File != file || len(d.Descriptors) != 9 || len(c.Files) != 1 || c.Files[0] != file {
		t.Fatalf("domain %q file %q with %d descriptors, files %q", d.Name, d.File, len(d.Descriptors), c.Files)
	}
	tenant := d.Descriptors[2]
	if tenant.Key != "tenant" || tenant.Value != "acme" || tenant.Rule != nil || tenant.Line != 23 || len(tenant.Descriptors) != 4 {
		t.Errorf("tenant descriptor: %+v", tenant)
	}
	method := tenant.Descriptors[3].Descriptors[1]
	if method.Key != "method" || method.Value != "" || !method.ValueToMetric {
		t.Errorf("method descriptor: %+v", method)
	}
	if internal := d.Descriptors[3]; internal.Value != "internal" || internal.Rule != nil || internal.Descriptors != nil {
		t.Errorf("whitelisted descriptor: %+v", internal)
	}
}

// TestParseReadme loads the examples of envoyproxy/ratelimit's README.
func TestParseReadme(t *testing.T) {
	for _, tc := range []struct {
		file   string
		domain string
		rules  int
	}{
		{"example1.yaml", "mongo_cps", 2},
		{"example2.yaml", "messaging", 2},
		{"example3.yaml", "edge_proxy_per_ip", 2},
		{"example4a.yaml", "example4", 1},
		{"example4b.yaml", "example4", 1},
		{"example5.yaml", "internal", 2},
		{"example6.yaml", "example6", 2},
		{"example7.yaml", "example7", 2},
		{"example8.yaml", "example8", 2},
		{"example9.yaml", "example9", 3},
		{"example10.yaml", "example10", 1},
		{"example11.yaml", "example11", 2},
	} {
		c := mustLoad(t, "testdata/readme/"+tc.file)
		if c.Domains[tc.domain] == nil || len(c.Rules()) != tc.rules {
			t.Errorf("%s: domains %v, %d rules; want %s with %d", tc.file, c.Domains, len(c.Rules()), tc.domain, tc.rules)
		}
		for _, r := range c.Rules() {
			if !r.Unlimited && r.Limit.Algorithm != redlimit.SlidingWindow {
				t.Errorf("%s: %s counted by %s, want the default sliding_window", tc.file, r.Path, r.Limit.Algorithm)
			}
		}
	}
}

// TestParseDenyAll loads requests_per_unit: 0, envoyproxy/ratelimit's
// block, for every algorithm: a DenyAll rule that keeps its unit,
// algorithm and failure policy.
func TestParseDenyAll(t *testing.T) {
	c := mustLoad(t, "testdata/readme/example3.yaml")
	r := c.Match("edge_proxy_per_ip", e("remote_address", "50.0.0.5"))
	if r == nil || !r.DenyAll || r.Limit.Count != 0 || r.Limit.Period != time.Second {
		t.Fatalf("50.0.0.5: %+v, want a deny-all rule per second", r)
	}
	if r := c.Match("edge_proxy_per_ip", e("remote_address", "50.0.0.1")); r == nil || r.DenyAll || r.Limit.Count != 10 {
		t.Errorf("50.0.0.1: %+v, want 10 a second", r)
	}
	if v := r.View(); !v.DenyAll || v.RequestsPerUnit != 0 || v.Unit != "second" {
		t.Errorf("view %+v", v)
	}
	for _, alg := range []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket"} {
		src := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0, algorithm: " + alg + ", failure_policy: fail_open}\n"
		d, err := Parse("deny.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		r := d.Rules()[0]
		if !r.DenyAll || r.Limit.Algorithm.String() != alg || r.Limit.Failure != redlimit.FailOpen || r.Limit.Period != time.Hour {
			t.Errorf("%s: %+v", alg, r)
		}
	}
	// The rest of the rule is still checked.
	if _, err := Parse("deny.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0, algorithm: leaky}\n")); err == nil {
		t.Error("an unknown algorithm beside requests_per_unit 0 loaded")
	}
}

// TestParseInvalid checks that each invalid file is rejected with an error
// naming its file, line and field.
func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		file  string
		line  int
		field string
		msg   string
		cause error // also wrapped, when not nil
	}{
		{"unknown_unit.yaml", 5, "descriptors[0].rate_limit.unit", `unknown unit "fortnight" (want second, minute, hour, day, week, month, year)`, nil},
		{"unknown_key.yaml", 4, "descriptors[0].rate_limits", `unknown key, did you mean "rate_limit"?`, nil},
		{"unknown_key_rate_limit.yaml", 4, "descriptors[0].rate_limit.requests_per_unit", "missing", nil},
		{"unknown_key_top.yaml", 2, "descriptor", `unknown key, did you mean "descriptors"? (want domain, descriptors, algorithm, failure_policy, counting)`, nil},
		{"duplicate_descriptor.yaml", 8, "descriptors[1]", `duplicate descriptor key "database" value "users" (first at line 3)`, nil},
		{"duplicate_key_alone.yaml", 9, "descriptors[0].descriptors[1]", `duplicate descriptor key "user" (first at line 5)`, nil},
		{"duplicate_path.yaml", 5, "descriptors[1]", `descriptor key "a_b" has the path "api.a_b" of descriptor key "a" value "b" at line 3`, nil},
		{"negative.yaml", 6, "descriptors[0].rate_limit.requests_per_unit", "-5 is negative", redlimit.ErrInvalidLimit},
		{"missing_requests_per_unit.yaml", 4, "descriptors[0].rate_limit.requests_per_unit", "missing", redlimit.ErrInvalidLimit},
		{"missing_unit.yaml", 4, "descriptors[0].rate_limit.unit", "missing (want second, minute", nil},
		{"too_many_requests.yaml", 6, "descriptors[0].rate_limit.requests_per_unit", "4294967296 is above 4294967295", redlimit.ErrInvalidLimit},
		{"fraction.yaml", 6, "descriptors[0].rate_limit.requests_per_unit", `want a whole number, got "1.5"`, nil},
		{"quoted_number.yaml", 6, "descriptors[0].rate_limit.requests_per_unit", `want a whole number, got "10"`, nil},
		{"replaces_unknown.yaml", 13, "descriptors[1].rate_limit.replaces[0].name", `no rule of domain "api" is named "per_usr"`, nil},
		{"replaces_self.yaml", 9, "descriptors[0].rate_limit.replaces[0].name", "a rule cannot replace itself", nil},
		{"replaces_empty.yaml", 8, "descriptors[0].rate_limit.replaces[0].name", "empty", nil},
		{"missing_key.yaml", 5, "descriptors[0].descriptors[0].key", "missing", nil},
		{"empty_key.yaml", 3, "descriptors[0].key", "empty", nil},
		{"two_domains.yaml", 7, "domain", "given twice (first at line 1); a file holds one domain", nil},
		{"two_documents.yaml", 8, "", "a second YAML document: a file holds one domain", nil},
		{"empty_domain.yaml", 1, "domain", "empty", nil},
		{"missing_domain.yaml", 1, "domain", "missing", nil},
		{"empty_file.yaml", 0, "", "the file is empty", nil},
		{"top_list.yaml", 1, "", "want a mapping, got a list", nil},
		{"descriptors_mapping.yaml", 3, "descriptors", "want a list, got a mapping", nil},
		{"descriptor_string.yaml", 3, "descriptors[0]", `want a mapping, got "user"`, nil},
		{"rate_limit_list.yaml", 5, "descriptors[0].rate_limit", "want a mapping, got a list", nil},
		{"unlimited_with_unit.yaml", 6, "descriptors[0].rate_limit.unit", "an unlimited rule takes no unit", nil},
		{"unlimited_with_algorithm.yaml", 6, "descriptors[0].rate_limit.algorithm", "an unlimited rule takes no algorithm", nil},
		{"unknown_algorithm.yaml", 7, "descriptors[0].rate_limit.algorithm", `unknown algorithm "leaky_bucket" (want fixed_window, sliding_log, sliding_window, token_bucket)`, redlimit.ErrUnknownAlgorithm},
		{"unknown_algorithm_top.yaml", 2, "algorithm", `unknown algorithm "gcra"`, redlimit.ErrUnknownAlgorithm},
		{"unknown_failure_policy.yaml", 2, "failure_policy", `unknown failure policy "fail_sometimes" (want local, fail_open, fail_closed)`, redlimit.ErrInvalidLimit},
		{"burst_without_token_bucket.yaml", 7, "descriptors[0].rate_limit.burst", "applies to token_bucket only, and the algorithm is sliding_window", redlimit.ErrInvalidBurst},
		{"burst_zero.yaml", 8, "descriptors[0].rate_limit.burst", "0 is not in 1..", redlimit.ErrInvalidBurst},
		{"burst_too_large.yaml", 4, "descriptors[0].rate_limit", "invalid burst: burst 1000000000000 of 1 per 8760h0m0s spans more than 2^52", redlimit.ErrInvalidBurst},
		{"sliding_log_too_large.yaml", 6, "descriptors[0].rate_limit.requests_per_unit", "200000 is above 100000, the most a sliding_log keeps (use sliding_window)", redlimit.ErrInvalidLimit},
		{"bad_bool.yaml", 4, "descriptors[0].shadow_mode", `want true or false, got "maybe"`, nil},
		{"share_threshold_exact.yaml", 5, "descriptors[0].share_threshold", `applies to a wildcard value (one holding "*"), and this descriptor's value "reports" has none`, nil},
		{"share_threshold_key_alone.yaml", 6, "descriptors[0].descriptors[0].share_threshold", `applies to a wildcard value (one holding "*"), and this descriptor's value "" has none`, nil},
		{"metadata_list.yaml", 9, "descriptors[0].metadata", "want a mapping, got a list", nil},
		{"metadata_nan.yaml", 11, "descriptors[0].metadata.weights.b", `".nan" is not a finite number`, nil},
		{"metadata_too_deep.yaml", 40, "descriptors[0].metadata.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a", "metadata nests more than 32 deep", nil},
		{"metadata_duplicate.yaml", 11, "descriptors[0].metadata.route.name", "given twice (first at line 10)", nil},
		{"unit_multiplier_zero.yaml", 7, "descriptors[0].rate_limit.unit_multiplier", "0 is not in 1..5270400 (5270400 minutes make 87840h0m0s, the longest period)", redlimit.ErrInvalidLimit},
		{"unit_multiplier_too_large.yaml", 7, "descriptors[0].rate_limit.unit_multiplier", "3661 is not in 1..3660", redlimit.ErrInvalidLimit},
		{"unit_multiplier_fraction.yaml", 7, "descriptors[0].rate_limit.unit_multiplier", `want a whole number, got "2.5"`, nil},
		{"unlimited_with_unit_multiplier.yaml", 6, "descriptors[0].rate_limit.unit_multiplier", "an unlimited rule takes no unit_multiplier", nil},
		{"unknown_counting.yaml", 7, "descriptors[0].rate_limit.counting", `unknown counting "envoy" (want auto, admission, debit)`, nil},
		{"unknown_counting_top.yaml", 2, "counting", `unknown counting "always" (want auto, admission, debit)`, nil},
		{"bad_yaml.yaml", 5, "", "invalid YAML: found unexpected end of stream", nil},
		{"alias_cycle.yaml", 6, "descriptors[0].descriptors[0]", "an alias makes this descriptor contain itself", nil},
		{"non_string_key.yaml", 4, "descriptors[0]", "want a key name, got a list", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := "testdata/invalid/" + tc.file
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(path, data)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("%v does not wrap %v", err, tc.cause)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *Error", err)
			}
			if e.File != path || e.Line != tc.line || e.Field != tc.field || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got  file %q line %d field %q msg %q\nwant file %q line %d field %q msg containing %q",
					e.File, e.Line, e.Field, e.Msg, path, tc.line, tc.field, tc.msg)
			}
			prefix := fmt.Sprintf("%s:%d: %s: ", path, tc.line, tc.field)
			switch {
			case tc.line == 0:
				prefix = path + ": "
			case tc.field == "":
				prefix = fmt.Sprintf("%s:%d: ", path, tc.line)
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			// Load gives the same error.
			if _, lerr := Load(path); lerr == nil || lerr.Error() != err.Error() {
				t.Errorf("Load: %v\nParse: %v", lerr, err)
			}
		})
	}
}

// TestParseSeveralErrors checks that every problem of a file is reported,
// in line order, up to a limit.
func TestParseSeveralErrors(t *testing.T) {
	_, err := Load("testdata/invalid/several.yaml")
	want := []string{
		`testdata/invalid/several.yaml:5: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month, year)`,
		`testdata/invalid/several.yaml:10: descriptors[1].rate_limit.requests_per_unit: -1 is negative (want 0 to 4294967295)`,
		`testdata/invalid/several.yaml:11: descriptors[2]: duplicate descriptor key "ip" (first at line 7)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}

	_, err = Load("testdata/invalid/many_errors.yaml")
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != maxErrors+1 || !strings.HasSuffix(lines[maxErrors], "more than 20 errors; stopped") {
		t.Errorf("got %d lines, last %q; want %d, ending with a note", len(lines), lines[len(lines)-1], maxErrors+1)
	}
}

// TestParseCompat checks inputs envoyproxy/ratelimit accepts: nulls, YAML
// 1.1 booleans, envoy keys set to their defaults.
func TestParseCompat(t *testing.T) {
	d, err := Parse("compat.yaml", []byte(`
domain: compat
descriptors:
  - key: a
    value: ~               # no value
    rate_limit: ~          # no rule
    descriptors:           # no children
  - key: b
    shadow_mode: on
    detailed_metric: yes
    share_threshold: false
    quota_mode: no
    metadata:
    value_to_metric: off
    rate_limit:
      unit: Minute
      requests_per_unit: 0x10
      unlimited: false
      name: ~
      replaces: ~
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := d.Descriptors[0], d.Descriptors[1]
	if a.Key != "a" || a.Value != "" || a.Rule != nil || a.Descriptors != nil {
		t.Errorf("a: %+v", a)
	}
	r := b.Rule
	if r == nil || !r.Shadow || !r.DetailedMetric || b.ValueToMetric || r.Limit != redlimit.PerMinute(16) || r.Name != "" || r.Replaces != nil {
		t.Errorf("b: %+v rule %+v", b, r)
	}
}

// TestParseAliasBomb checks that aliases cannot make a file expand without
// bound.
func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: bomb\ndescriptors:\n  - key: k0\n    descriptors: &l0\n      - key: x\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "  - key: k%d\n    descriptors: &l%d\n", i, i)
		for j := 0; j < 8; j++ {
			fmt.Fprintf(&b, "      - key: x%d\n        descriptors: *l%d\n", j, i-1)
		}
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "aliases expand to too many nodes") {
		t.Errorf("got %v, want too many descriptors", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestParseAliasShared checks that a list shared by alias gives each parent
// its own copy of the children.
func TestParseAliasShared(t *testing.T) {
	d, err := Parse("shared.yaml", []byte(`
domain: shared
descriptors:
  - key: tenant
    value: a
    descriptors: &users
      - key: user
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: tenant
    value: b
    descriptors: *users
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := d.Rules()
	if len(rules) != 2 || rules[0].Path != "shared.tenant_a.user" || rules[1].Path != "shared.tenant_b.user" {
		t.Errorf("rules %v", rules)
	}
}

// TestParseMerge checks merge keys: own keys win, a list merges in order,
// and a mapping merged twice or into itself adds nothing (and ends).
func TestParseMerge(t *testing.T) {
	d, err := Parse("merge.yaml", []byte(`
domain: merge
descriptors:
  - key: a
    rate_limit: &base {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: b
    rate_limit: &hour {<<: *base, unit: hour}
  - key: c
    rate_limit: {<<: [*hour, *base, *hour], requests_per_unit: 30}
  - key: d
    rate_limit: &self {<<: [*self, *self, *self, *self, *self, *self, *self, *self], unit: day, requests_per_unit: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []redlimit.Limit{
		redlimit.PerMinute(10).FixedWindow(),
		redlimit.PerHour(10).FixedWindow(),
		redlimit.PerHour(30).FixedWindow(),
		redlimit.PerDay(4),
	}
	for i, r := range d.Rules() {
		if r.Limit != want[i] {
			t.Errorf("rule %s: %v, want %v", r.Path, r.Limit, want[i])
		}
	}

	_, err = Parse("merge.yaml", []byte("domain: m\ndescriptors:\n  - key: k\n    <<: [1]\n"))
	if err == nil || !strings.Contains(err.Error(), "merge.yaml:4: descriptors[0]: a merge key (<<) takes a mapping or a list of mappings, got \"1\"") {
		t.Errorf("bad merge: %v", err)
	}
}

// TestParseDocuments checks that empty YAML documents around the domain's
// are harmless, and that a domain with no descriptors is valid.
func TestParseDocuments(t *testing.T) {
	for _, data := range []string{
		"domain: a\n---\n",
		"---\ndomain: a\n...\n",
		"domain: a\n---\n---\n~\n",
		"domain: a\ndescriptors: []\n",
	} {
		d, err := Parse("docs.yaml", []byte(data))
		if err != nil || d.Name != "a" || len(d.Rules()) != 0 {
			t.Errorf("%q: %+v, %v", data, d, err)
		}
	}
	c := mustLoad(t, "testdata/empty_rules.yaml")
	if c.Domains["empty"] == nil || c.Match("empty", e("k", "v")) != nil {
		t.Errorf("empty_rules.yaml: %+v", c)
	}
}
