package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// do sends one request to the running server with the given Host and
// header fields, and returns the status and body.
func (r *running) do(t *testing.T, method, path, host, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.HTTPAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkProblem checks that body is a problem+json of status code whose
// detail holds detail.
func checkProblem(t *testing.T, what string, code int, body string, want int, detail string) {
	t.Helper()
	var p struct {
		Status int
		Detail string
	}
	if err := json.Unmarshal([]byte(body), &p); code != want || err != nil || p.Status != want || !strings.Contains(p.Detail, detail) {
		t.Errorf("%s: %d %.300s, want a %d problem with %q", what, code, body, want, detail)
	}
}

// Finding 11: a page on another site POSTed to /json with text/plain from
// its own Origin and spent a visitor's limit (200, 200, 429). Cross-site
// requests that change anything are refused (403), however they are typed,
// and consume nothing; the same origin and clients that are not browsers
// (no Origin, no Sec-Fetch-Site) are served.
func TestCrossSiteRequests(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 2))
	r := start(t, Options{ConfigPath: path})
	body := `{"domain":"web","descriptors":[{"entries":[{"key":"ip","value":"1.1.1.1"}]}]}`
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"text/plain from another Origin", []string{"Content-Type", "text/plain", "Origin", "https://evil.example"}},
		{"a form from another Origin", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example"}},
		{"a form, Sec-Fetch-Site cross-site", []string{"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "cross-site"}},
		{"JSON from another Origin", []string{"Content-Type", "application/json", "Origin", "https://evil.example"}},
		{"Sec-Fetch-Site cross-site", []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site", "Origin", "http://other.localhost:8080"}},
	} {
		code, out := r.do(t, "POST", "/json", "", body, tc.header...)
		checkProblem(t, tc.name, code, out, http.StatusForbidden, "cross-origin")
	}
	// The limit (2 a minute) is whole: same-origin and non-browser requests
	// get 200, 200, then 429.
	for i, header := range [][]string{
		{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin", "Origin", "http://" + r.HTTPAddr()},
		{"Content-Type", "application/x-www-form-urlencoded"}, // curl -d
		{"Content-Type", "application/json", "Sec-Fetch-Site", "none"},
	} {
		want := []int{200, 200, 429}[i]
		if code, out := r.do(t, "POST", "/json", "", body, header...); code != want {
			t.Fatalf("request %d (%q): %d %s, want %d", i, header, code, out, want)
		}
	}
}

// Finding 11: every HTTP path answered any Host, so a page on a name its
// attacker points at 127.0.0.1 (DNS rebinding) could read /api/stats (the
// most limited keys), /rules, /metrics and the profiles as same-origin.
// Only the allowed hosts are served: by default IP addresses and
// localhost, on any port; others get 421.
func TestHostAllowList(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1000))
	r := start(t, Options{ConfigPath: path, Pprof: true})
	_, port, _ := net.SplitHostPort(r.HTTPAddr())
	body := `{"domain":"web","descriptors":[{"entries":[{"key":"ip","value":"1"}]}]}`
	paths := []string{"/api/stats", "/rules", "/metrics", "/healthz", "/readyz", "/", "/debug/pprof/", "/json"}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example", "127.0.0.1.nip.io:" + port, "LOCALHOST.:" + port + "x"} {
		for _, p := range paths {
			method := "GET"
			if p == "/json" {
				method = "POST"
			}
			code, out := r.do(t, method, p, host, body, "Content-Type", "application/json")
			checkProblem(t, "Host "+host+" "+p, code, out, http.StatusMisdirectedRequest, "not allowed")
		}
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost", "LocalHost:9999", "localhost.:" + port,
		"10.1.2.3:" + port, "[fe80::1%25eth0]:" + port, "127.0.0.1:1234"} {
		for _, p := range paths {
			method := "GET"
			if p == "/json" {
				method = "POST"
			}
			if code, out := r.do(t, method, p, host, body, "Content-Type", "application/json"); code != 200 {
				t.Errorf("Host %s %s: %d %.200s, want 200", host, p, code, out)
			}
		}
	}
}

// Options.AllowedHosts adds names (any port), names with a port, and
// domains with their subdomains (a leading dot); "*" allows any Host.
func TestAllowedHostsOption(t *testing.T) {
	t.Parallel()
	r := start(t, Options{AllowedHosts: []string{"ratelimit.internal", "dash.example:9000", ".svc.cluster.local"}})
	for host, want := range map[string]int{
		"ratelimit.internal":               200,
		"RateLimit.Internal:8080":          200,
		"dash.example:9000":                200,
		"dash.example:9001":                421,
		"dash.example":                     421,
		"svc.cluster.local":                200,
		"redlimit.ns.svc.cluster.local:80": 200,
		"evilsvc.cluster.local":            421,
		"127.0.0.1":                        200,
		"localhost:1":                      200,
		"evil.example":                     421,
	} {
		if code, _ := r.do(t, "GET", "/healthz", host, ""); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
	any := start(t, Options{AllowedHosts: []string{"*"}})
	if code, _ := any.do(t, "GET", "/healthz", "evil.example", ""); code != 200 {
		t.Errorf("AllowedHosts *: %d", code)
	}
}

// A GET that a page of another site makes the browser send (an image, a
// frame, a fetch) is refused too: under --pprof, <img src=".../profile">
// would make the server profile itself. A link the user follows (a
// top-level navigation) and same-origin requests are served.
func TestCrossSiteGets(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 2))
	r := start(t, Options{ConfigPath: path, Pprof: true})
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"image from another site", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"}, http.StatusForbidden},
		{"frame from another site", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"}, http.StatusForbidden},
		{"fetch from another site", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"}, http.StatusForbidden},
		{"link followed from another site", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, http.StatusOK},
		{"same origin", []string{"Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"}, http.StatusOK},
		{"not a browser", nil, http.StatusOK},
	} {
		for _, p := range []string{"/debug/pprof/", "/metrics"} {
			code, out := r.do(t, "GET", p, "", "", tc.header...)
			if code != tc.want {
				t.Errorf("%s, GET %s: %d %s, want %d", tc.name, p, code, out, tc.want)
			}
		}
	}
}
