package config

import (
	"errors"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// TestFromXDS checks that RateLimitConfig resources give the configuration
// the same rules as a file give, through the same parser.
func TestFromXDS(t *testing.T) {
	res := []*rlsconf.RateLimitConfig{{
		Name:   "gateway",
		Domain: "web",
		Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "ip", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 10, Name: "per-ip"}},
			{Key: "path", Value: "/open", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
			{Key: "blocked", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND}},
			{Key: "tenant", Descriptors: []*rlsconf.RateLimitDescriptor{{
				Key: "user", DetailedMetric: true, ShadowMode: true,
				RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 5,
					Replaces: []*rlsconf.RateLimitReplace{{Name: "per-ip"}}},
			}}},
		},
	}}
	got, err := Loader{}.FromXDS(res)
	if err != nil {
		t.Fatal(err)
	}
	file := `domain: web
descriptors:
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-ip}
  - key: path
    value: /open
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: tenant
    descriptors:
      - key: user
        detailed_metric: true
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 5, replaces: [{name: per-ip}]}
`
	d, err := Parse("rules.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := ruleSummary(got), ruleSummary(want); g != w {
		t.Errorf("rules from xDS:\n%s\nwant, as the file gives:\n%s", g, w)
	}
	if len(got.Files) != 1 || got.Files[0] != "xds:gateway" {
		t.Errorf("Files %q, want [xds:gateway]", got.Files)
	}
}

// ruleSummary returns what the rules of c decide, one line a rule.
func ruleSummary(c *Config) string {
	var b strings.Builder
	for _, r := range c.Rules() {
		b.WriteString(r.Path + " " + r.Name + " " + r.Limit.String() + " " + r.Unit)
		for _, f := range []struct {
			on   bool
			name string
		}{{r.Unlimited, "unlimited"}, {r.Shadow, "shadow"}, {r.DetailedMetric, "detailed"}, {r.DenyAll, "deny_all"}} {
			if f.on {
				b.WriteString(" " + f.name)
			}
		}
		b.WriteString(" replaces=" + strings.Join(r.Replaces, ",") + "\n")
	}
	return b.String()
}

// TestFromXDSInvalid checks that a bad resource is refused with the
// parser's errors, naming the resource.
func TestFromXDSInvalid(t *testing.T) {
	tests := []struct {
		name string
		res  []*rlsconf.RateLimitConfig
		want string
	}{
		{"no domain", []*rlsconf.RateLimitConfig{{Name: "a"}}, "xds:a"},
		{"no unit", []*rlsconf.RateLimitConfig{{Name: "a", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 3}}}}}, "unit"},
		{"no key", []*rlsconf.RateLimitConfig{{Name: "a", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{
			{RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 3}}}}}, "key"},
		{"unknown replace", []*rlsconf.RateLimitConfig{{Name: "a", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 3,
				Replaces: []*rlsconf.RateLimitReplace{{Name: "nope"}}}}}}}, "nope"},
		{"a domain twice", []*rlsconf.RateLimitConfig{{Name: "a", Domain: "d"}, {Name: "b", Domain: "d"}}, "d"},
		{"nil resource", []*rlsconf.RateLimitConfig{nil}, "xds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Loader{}.FromXDS(tt.res)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %q does not name %q", err, tt.want)
			}
		})
	}
}
