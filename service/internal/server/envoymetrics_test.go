package server

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

const envoyRules = `domain: web
algorithm: fixed_window
counting: admission
descriptors:
  - key: ip
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: tenant
    descriptors:
      - key: user
        detailed_metric: true
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
`

// scrape returns the body of url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b)
}

// TestEnvoyPrometheusSeries checks the series envoyproxy/ratelimit's default
// statsd mapper produces, on PrometheusAddr and beside redlimit's own on
// /metrics, counted per hit as its base limiter counts them.
func TestEnvoyPrometheusSeries(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, envoyRules)
	r := start(t, Options{ConfigPath: path, EnvoyMetrics: true, PrometheusAddr: "127.0.0.1:0", PrometheusPath: "/stats"})

	r.hits(t, 5, "ip", "10.0.0.1")
	r.hits(t, 4, "ip", "10.0.0.1") // 9: near 1
	r.hits(t, 3, "ip", "10.0.0.1") // over 2, near 1 (9 → 12 against 10)
	r.hits(t, 1, "tenant", "acme", "user", "u1")
	r.hits(t, 2, "tenant", "acme", "user", "u1") // over 1, near 0 (floor(1.6)=1)
	r.hits(t, 2, "shadowed", "x")                // over 1, shadow 1, near 1

	want := []string{
		`ratelimit_service_rate_limit_total_hits{domain="web",key1="ip",key2=""} 12`,
		`ratelimit_service_rate_limit_within_limit{domain="web",key1="ip",key2=""} 9`,
		`ratelimit_service_rate_limit_near_limit{domain="web",key1="ip",key2=""} 2`,
		`ratelimit_service_rate_limit_over_limit{domain="web",key1="ip",key2=""} 2`,
		`ratelimit_service_rate_limit_shadow_mode{domain="web",key1="ip",key2=""} 0`,
		`ratelimit_service_rate_limit_total_hits{domain="web",key1="tenant_acme",key2="user_u1"} 3`,
		`ratelimit_service_rate_limit_within_limit{domain="web",key1="tenant_acme",key2="user_u1"} 1`,
		`ratelimit_service_rate_limit_over_limit{domain="web",key1="tenant_acme",key2="user_u1"} 1`,
		`ratelimit_service_rate_limit_near_limit{domain="web",key1="tenant_acme",key2="user_u1"} 1`,
		`ratelimit_service_rate_limit_total_hits{domain="web",key1="shadowed",key2=""} 2`,
		`ratelimit_service_rate_limit_over_limit{domain="web",key1="shadowed",key2=""} 1`,
		`ratelimit_service_rate_limit_shadow_mode{domain="web",key1="shadowed",key2=""} 1`,
	}
	for _, url := range []string{"http://" + r.PrometheusAddr() + "/stats", "http://" + r.HTTPAddr() + "/metrics"} {
		body := scrape(t, url)
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("%s: no %s in\n%s", url, w, grepLines(body, "ratelimit_service"))
			}
		}
		if !strings.Contains(body, "redlimit_rls_requests_total") {
			t.Errorf("%s: redlimit's own series missing", url)
		}
	}
}

// TestEnvoyMetricsBounded checks that detailed_metric labels stay within
// the caps of package rls: a label that loses its slot loses its series.
func TestEnvoyMetricsBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, envoyRules)
	r := start(t, Options{ConfigPath: path, EnvoyMetrics: true})
	const users = 150 // above the 100 labels a rule may hold
	for range 2 {
		for i := range users {
			r.hits(t, 1, "tenant", "acme", "user", fmt.Sprintf("u%d", i))
		}
	}
	body := scrape(t, "http://"+r.HTTPAddr()+"/metrics")
	n := strings.Count(body, "ratelimit_service_rate_limit_total_hits{")
	// The rule's path, and at most 100 detailed labels.
	if n < 2 || n > 101 {
		t.Errorf("%d total_hits series, want 2 to 101", n)
	}
}

// grepLines returns the lines of body that hold s.
func grepLines(body, s string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStatNames checks names and tags as envoyproxy/ratelimit writes them.
func TestStatNames(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"web.ip", "web.ip"},
		{"web.remote_address_10.0.0.1", "web.remote_address_10_0_0_1"},
		{"web.path_/a:b|c", "web.path_/a_b_c"},
		{"web.v_1.2.3", "web.v_1.2.3"},
	} {
		if got := sanitizeStatName(tt.in); got != tt.want {
			t.Errorf("sanitizeStatName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := statsdTags(map[string]string{"z": "1", "a": "x.y:z|w", "": "v", "k": ""}), ".__a=x_y_z_w.__z=1"; got != want {
		t.Errorf("statsdTags = %q, want %q", got, want)
	}
	if got := statsdTags(nil); got != "" {
		t.Errorf("statsdTags(nil) = %q", got)
	}
}
