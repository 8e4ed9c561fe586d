package config

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// e builds a request descriptor from key, value pairs.
func e(kv ...string) []Entry {
	entries := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		entries = append(entries, Entry{Key: kv[i], Value: kv[i+1]})
	}
	return entries
}

type matchCase struct {
	file    string // under testdata/
	domain  string
	entries []Entry
	want    string // the path of the rule, "" for none
}

// matchCases are the matching examples of envoyproxy/ratelimit's README and
// of this package's fixtures.
var matchCases = []matchCase{
	// README example 1: two values of one key.
	{"readme/example1.yaml", "mongo_cps", e("database", "users"), "mongo_cps.database_users"},
	{"readme/example1.yaml", "mongo_cps", e("database", "default"), "mongo_cps.database_default"},
	{"readme/example1.yaml", "mongo_cps", e("database", "orders"), ""},
	{"readme/example1.yaml", "mongo_cps", e("database", "users", "table", "x"), ""},
	{"readme/example1.yaml", "other_domain", e("database", "users"), ""},
	{"readme/example1.yaml", "mongo_cps", nil, ""},

	// Example 2: a placeholder with a nested key, and a key alone.
	{"readme/example2.yaml", "messaging", e("message_type", "marketing", "to_number", "2061111111"), "messaging.message_type_marketing.to_number"},
	{"readme/example2.yaml", "messaging", e("message_type", "marketing", "to_number", "2062222222"), "messaging.message_type_marketing.to_number"},
	{"readme/example2.yaml", "messaging", e("to_number", "2061111111"), "messaging.to_number"},
	{"readme/example2.yaml", "messaging", e("message_type", "marketing"), ""},
	{"readme/example2.yaml", "messaging", e("message_type", "transactional", "to_number", "2061111111"), ""},

	// Example 3: key_value before key alone.
	{"readme/example3.yaml", "edge_proxy_per_ip", e("remote_address", "50.0.0.1"), "edge_proxy_per_ip.remote_address"},
	{"readme/example3.yaml", "edge_proxy_per_ip", e("remote_address", "50.0.0.5"), "edge_proxy_per_ip.remote_address_50.0.0.5"},

	// Example 4: a rule applies at the depth of the request descriptor.
	{"readme/example4a.yaml", "example4", e("key", "value", "subkey", "subvalue"), ""},
	{"readme/example4a.yaml", "example4", e("key", "value"), "example4.key_value"},
	{"readme/example4b.yaml", "example4", e("key", "value", "subkey", "subvalue"), "example4.key_value.subkey"},
	{"readme/example4b.yaml", "example4", e("key", "value"), ""},

	// Example 5: unlimited.
	{"readme/example5.yaml", "internal", e("ldap", "cn=admin"), "internal.ldap"},
	{"readme/example5.yaml", "internal", e("azure", "westeurope"), "internal.azure"},

	// Example 6: shadow mode.
	{"readme/example6.yaml", "example6", e("service", "auth-service", "user", "user-a"), "example6.service.user_user-a"},
	{"readme/example6.yaml", "example6", e("service", "auth-service", "user", "user-b"), "example6.service.user_user-b"},
	{"readme/example6.yaml", "example6", e("service", "auth-service", "user", "user-c"), ""},

	// Example 7: both rules match their own descriptors; the service
	// applies replaces when one request has both.
	{"readme/example7.yaml", "example7", e("key_1", "value_1", "user", "bkthomps"), "example7.key_1_value_1.user_bkthomps"},
	{"readme/example7.yaml", "example7", e("key_2", "value_2", "user", "bkthomps"), "example7.key_2_value_2.user_bkthomps"},
	{"readme/example7.yaml", "example7", e("key_1", "value_1", "key_2", "value_2", "user", "bkthomps"), ""},

	// Example 8: detailed metric.
	{"readme/example8.yaml", "example8", e("key1", "unspecified_value"), "example8.key1"},
	{"readme/example8.yaml", "example8", e("key1", "value1"), "example8.key1_value1"},

	// Example 9: wildcards, trailing, in the middle, several.
	{"readme/example9.yaml", "example9", e("key1", "value1"), "example9.key1_value*"},
	{"readme/example9.yaml", "example9", e("key1", "valueXYZ"), "example9.key1_value*"},
	{"readme/example9.yaml", "example9", e("key1", "value"), "example9.key1_value*"},
	{"readme/example9.yaml", "example9", e("key1", "valu"), ""},
	{"readme/example9.yaml", "example9", e("path", "/api/123/action"), "example9.path_/api/*/action"},
	{"readme/example9.yaml", "example9", e("path", "/api/user-id/action"), "example9.path_/api/*/action"},
	{"readme/example9.yaml", "example9", e("path", "/api//action"), "example9.path_/api/*/action"},
	{"readme/example9.yaml", "example9", e("path", "/api/123/other"), ""},
	{"readme/example9.yaml", "example9", e("path", "/api/action"), ""},
	{"readme/example9.yaml", "example9", e("route", "/api/v1/resource/123/action"), "example9.route_/api/*/resource/*/action"},
	{"readme/example9.yaml", "example9", e("route", "/api/v2/resource/456/action"), "example9.route_/api/*/resource/*/action"},
	{"readme/example9.yaml", "example9", e("route", "/api/v1/resource/action"), ""},

	// Example 10: value_to_metric changes no match.
	{"readme/example10.yaml", "example10", e("route", "api", "http_method", "GET", "subject_id", "123"), "example10.route.http_method.subject_id"},

	// The full fixture.
	{"full.yaml", "api", e("remote_address", "10.0.0.1"), "api.remote_address_10.0.0.1"},
	{"full.yaml", "api", e("remote_address", "10.0.0.2"), "api.remote_address"},
	{"full.yaml", "api", e("remote_address", ""), "api.remote_address"},
	{"full.yaml", "api", e("Remote_Address", "10.0.0.1"), ""}, // keys are case-sensitive
	{"full.yaml", "api", e("tenant", "acme", "path", "/login"), "api.tenant_acme.path_/login"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/api/v1/users"), "api.tenant_acme.path_/api/*"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/api/"), "api.tenant_acme.path_/api/*"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/users/42/avatar"), "api.tenant_acme.path_/users/*/avatar"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/users/42/other"), ""}, // the key-alone path has no rule
	{"full.yaml", "api", e("tenant", "acme", "path", "/users/42/other", "method", "GET"), "api.tenant_acme.path.method_GET"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/x", "method", "POST"), "api.tenant_acme.path.method"},
	{"full.yaml", "api", e("tenant", "acme", "path", "/login", "method", "GET"), ""}, // no backtracking to the key alone
	{"full.yaml", "api", e("tenant", "acme", "path", "/x", "method", "GET", "extra", "1"), ""},
	{"full.yaml", "api", e("tenant", "acme"), ""},
	{"full.yaml", "api", e("tenant", "internal"), ""},
	{"full.yaml", "api", e("tenant", "other", "path", "/login"), ""},
	{"full.yaml", "api", e("health", "anything"), "api.health"},
	{"full.yaml", "api", e("api_key", "500"), "api.api_key_500"},
	{"full.yaml", "api", e("status", "429"), "api.status_429"},
	{"full.yaml", "api", e("status", "true"), "api.status_true"},
	{"full.yaml", "api", e("status", "404"), ""},

	// Matching order at one level.
	{"wildcards.yaml", "wild", e("path", "/api/v1/users"), "wild.path_/api/v1/users"},
	{"wildcards.yaml", "wild", e("path", "/api/v1/orders"), "wild.path_/api/v1/*"},
	{"wildcards.yaml", "wild", e("path", "/api/v2"), "wild.path_/api/*"},
	{"wildcards.yaml", "wild", e("path", "/api/*"), "wild.path_/api/*"}, // a value equal to a pattern is an exact match
	{"wildcards.yaml", "wild", e("path", "/static/site.css"), "wild.path_/static/*.css"},
	{"wildcards.yaml", "wild", e("path", "/static/site.js"), "wild.path"},
	{"wildcards.yaml", "wild", e("path", ""), "wild.path"},
	{"wildcards.yaml", "wild", e("method", "GET"), "wild.method_*"},
	{"wildcards.yaml", "wild", e("method", ""), "wild.method_*"},
	{"wildcards.yaml", "wild", e("a", "bc"), "wild.a_b*"},
	// envoyproxy/ratelimit matches "a_b*" against "<key>_<value>", so that
	// it takes (a_b, c) for the descriptor key a value b*; redlimit
	// compares the key and matches the value only.
	{"wildcards.yaml", "wild", e("a_b", "c"), ""},
}

// TestMatch runs matchCases on configs built by Load, on copies built by
// hand (every level scanned) and on copies with every level indexed.
func TestMatch(t *testing.T) {
	configs := map[string]*Config{}
	for _, tc := range matchCases {
		c := configs[tc.file]
		if c == nil {
			c = mustLoad(t, "testdata/"+tc.file)
			configs[tc.file] = c
		}
		for _, mode := range modes(c) {
			got := ""
			if r := mode.c.Match(tc.domain, tc.entries); r != nil {
				got = r.Path
			}
			if got != tc.want {
				t.Errorf("%s %s: Match(%q, %v) = %q, want %q", mode.name, tc.file, tc.domain, tc.entries, got, tc.want)
			}
		}
	}
}

// TestMatchRules checks the rules matched carry their file's settings.
func TestMatchRules(t *testing.T) {
	domain := func(file, name string) *Domain { return mustLoad(t, "testdata/readme/"+file).Domains[name] }
	c, err := New(
		domain("example5.yaml", "internal"),
		domain("example6.yaml", "example6"),
		domain("example7.yaml", "example7"),
		domain("example8.yaml", "example8"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Match("internal", e("ldap", "x")); r == nil || !r.Unlimited {
		t.Errorf("ldap: %+v, want unlimited", r)
	}
	if r := c.Match("example6", e("service", "s", "user", "user-a")); r == nil || !r.Shadow || r.Limit.Count != 10 {
		t.Errorf("user-a: %+v, want shadow 10/s", r)
	}
	if r := c.Match("example7", e("key_2", "value_2", "user", "bkthomps")); r == nil || len(r.Replaces) != 1 || r.Replaces[0] != "specific_limit" {
		t.Errorf("replaces: %+v", r)
	}
	if r := c.Match("example8", e("key1", "v")); r == nil || !r.DetailedMetric {
		t.Errorf("detailed: %+v", r)
	}
}

// TestLoadReadmeDir loads the README examples as one directory: the two
// versions of example 4 share a domain, which makes it fail.
func TestLoadReadmeDir(t *testing.T) {
	_, err := Load("testdata/readme")
	for _, want := range []string{
		`testdata/readme/example4b.yaml: domain: domain "example4" is already defined in testdata/readme/example4a.yaml`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not contain %q", err, want)
		}
	}
}

// unindexed returns a deep copy of c without indexes, as a Config built by
// hand would be: every level is scanned.
func unindexed(c *Config) *Config {
	var copyTree func([]*Descriptor) []*Descriptor
	copyTree = func(ds []*Descriptor) []*Descriptor {
		out := make([]*Descriptor, len(ds))
		for i, d := range ds {
			cp := *d
			cp.index = nil
			cp.Descriptors = copyTree(d.Descriptors)
			out[i] = &cp
		}
		return out
	}
	u := &Config{Domains: map[string]*Domain{}, Files: c.Files}
	for name, d := range c.Domains {
		u.Domains[name] = &Domain{Name: d.Name, File: d.File, Descriptors: copyTree(d.Descriptors)}
	}
	return u
}

// fullyIndexed returns a deep copy of c with every level indexed, however
// small.
func fullyIndexed(c *Config) *Config {
	u := unindexed(c)
	for _, d := range u.Domains {
		d.index = newIndex(d.Descriptors, 0)
		d.indexed = true
	}
	return u
}

// modes are the three ways a level can be searched.
func modes(c *Config) []struct {
	name string
	c    *Config
} {
	return []struct {
		name string
		c    *Config
	}{{"loaded", c}, {"scanned", unindexed(c)}, {"indexed", fullyIndexed(c)}}
}

func TestMatchNil(t *testing.T) {
	var c *Config
	if r := c.Match("api", e("a", "b")); r != nil {
		t.Errorf("nil Config matched %v", r)
	}
	var d *Domain
	if r := d.Match(e("a", "b")); r != nil {
		t.Errorf("nil Domain matched %v", r)
	}
	if r := (&Config{}).Match("api", e("a", "b")); r != nil {
		t.Errorf("empty Config matched %v", r)
	}
}

// TestMatchAllocs checks that Match does not allocate.
func TestMatchAllocs(t *testing.T) {
	c := mustLoad(t, "testdata/full.yaml")
	for _, entries := range [][]Entry{
		e("remote_address", "10.0.0.1"),
		e("remote_address", "10.0.0.2"),
		e("tenant", "acme", "path", "/users/42/avatar"),
		e("tenant", "acme", "path", "/x", "method", "POST"),
		e("nothing", "x"),
	} {
		for _, mode := range modes(c) {
			if n := testing.AllocsPerRun(100, func() { mode.c.Match("api", entries) }); n != 0 {
				t.Errorf("%s: Match(%v): %v allocations", mode.name, entries, n)
			}
		}
	}
}

// TestMatchConcurrent matches from many goroutines at once (run with -race).
func TestMatchConcurrent(t *testing.T) {
	c := mustLoad(t, "testdata/full.yaml")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if r := c.Match("api", e("tenant", "acme", "path", fmt.Sprintf("/api/%d", i))); r == nil {
					t.Error("no match")
					return
				}
				_ = c.Rules()
			}
		}()
	}
	wg.Wait()
}

func TestMatchWildcard(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"*", "", true},
		{"*", "anything", true},
		{"**", "", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*a", "ba", true},
		{"*a", "ab", false},
		{"a*a", "a", false}, // prefix and suffix do not overlap
		{"a*a", "aa", true},
		{"a*a", "aba", true},
		{"ab*ba", "aba", false},
		{"ab*ba", "abba", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "abcbc", true},
		{"a*bc*bc", "abcbc", true},
		{"a*bc*bc", "abcxbc", true},
		{"a*bc*bc", "abc", false},
		{"/api/*/resource/*/action", "/api/v1/resource/123/action", true},
		{"/api/*/resource/*/action", "/api/v1/resource/action", false},
		{"*x*", "x", true},
		{"*x*", "", false},
	} {
		if got := matchWildcard(tc.pattern, tc.s); got != tc.want {
			t.Errorf("matchWildcard(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
		if want := wildcardRegexp(tc.pattern).MatchString(tc.s); want != tc.want {
			t.Errorf("reference disagrees on (%q, %q)", tc.pattern, tc.s)
		}
	}
}

// wildcardRegexp is the reference matcher: each "*" is "(?s:.*)", the rest
// literal, the whole value anchored.
func wildcardRegexp(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`\A` + strings.Join(parts, `(?s:.*)`) + `\z`)
}

func BenchmarkMatch(b *testing.B) {
	c := mustLoad(b, "testdata/full.yaml")
	var sb strings.Builder
	sb.WriteString("domain: big\ndescriptors:\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&sb, "  - key: user\n    value: u%d\n    rate_limit: {unit: second, requests_per_unit: 10}\n", i)
	}
	big, err := Parse("big.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	c.Domains["big"] = big
	for _, bc := range []struct {
		name    string
		domain  string
		entries []Entry
	}{
		{"exact", "api", e("remote_address", "10.0.0.1")},
		{"key-alone", "api", e("remote_address", "192.168.1.1")},
		{"wildcard", "api", e("tenant", "acme", "path", "/users/42/avatar")},
		{"depth-3", "api", e("tenant", "acme", "path", "/x", "method", "GET")},
		{"1000-values", "big", e("user", "u999")},
		{"no-match", "api", e("nothing", "x")},
	} {
		for _, mode := range modes(c) {
			b.Run(bc.name+"/"+mode.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					mode.c.Match(bc.domain, bc.entries)
				}
			})
		}
	}
}
