package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

func TestHandlerPage(t *testing.T) {
	h := Handler(NewRecorder(RecorderOptions{}), Options{JSONPath: `/rls/json?x="<y>"`})
	w := get(t, h, "/")
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	body := w.Body.String()
	for _, want := range []string{
		`data-json-path="/rls/json?x=&#34;&lt;y&gt;&#34;"`, // escaped by html/template
		`src="static/app.js"`, `href="static/app.css"`,
		`id="total-decisions"`, `id="try-form"`, `id="top-keys"`, `id="rules"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// Nothing loads from elsewhere: no absolute URL in the page or its assets.
	for _, path := range []string{"/", "/static/app.js", "/static/app.css"} {
		if b := get(t, h, path).Body.String(); strings.Contains(b, "http://") || strings.Contains(b, "https://") || strings.Contains(b, "//cdn") {
			t.Errorf("%s refers to another site", path)
		}
	}
	if b := get(t, Handler(nil, Options{}), "/").Body.String(); !strings.Contains(b, `data-json-path="/json"`) {
		t.Error("default JSON path is not /json")
	}
}

func TestHandlerStatic(t *testing.T) {
	h := Handler(NewRecorder(RecorderOptions{}), Options{})
	for path, want := range map[string]string{
		"/static/app.js":  "text/javascript",
		"/static/app.css": "text/css",
	} {
		w := get(t, h, path)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), want) || w.Body.Len() == 0 {
			t.Errorf("GET %s = %d %s, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	}
	for _, path := range []string{"/static/", "/static/nope.js", "/static/index.html", "/nope", "/api/nope", "/index.html"} {
		if w := get(t, h, path); w.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, w.Code)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/stats", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/stats = %d, want 405", w.Code)
	}
}

func TestHandlerStats(t *testing.T) {
	c := newClock(t0)
	rec := newTestRecorder(c)
	observe(rec, at(secs(0.5)), 3, Event{Domain: "api", Rule: "api.ip", Key: "a", Allowed: true, Latency: time.Millisecond})
	observe(rec, at(secs(0.5)), 2, Event{Domain: "api", Rule: "api.ip", Key: "b", Source: redlimit.FromDenyCache})
	rec.SetBreakerState("closed")
	c.set(at(secs(1.5)))

	w := get(t, Handler(rec, Options{}), "/api/stats")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/stats = %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	// The JSON shape the page reads.
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	shape := map[string][]string{
		"":               {"time", "started", "end", "window_seconds", "rate_seconds", "totals", "rates", "per_second", "series", "sources", "latency", "breaker", "backend_errors", "top_keys"},
		"totals":         {"allowed", "denied", "shadow_denied"},
		"rates":          {"allowed", "denied", "shadow_denied"},
		"per_second":     {"allowed", "denied", "shadow_denied"},
		"series.0":       {"domain", "rule", "totals", "rates", "per_second"},
		"sources.0":      {"source", "total", "rate", "per_second"},
		"latency":        {"seconds", "count", "p50_ms", "p90_ms", "p99_ms", "count_per_second", "p50_per_second_ms", "p99_per_second_ms"},
		"breaker":        {"state", "since"},
		"backend_errors": {"total", "rate", "per_second"},
		"top_keys.0":     {"domain", "rule", "key", "count", "error"},
	}
	for path, keys := range shape {
		v := any(m)
		for _, p := range strings.Split(path, ".") {
			switch x := v.(type) {
			case map[string]any:
				if p != "" {
					v = x[p]
				}
			case []any:
				v = x[0]
			}
		}
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%q is %T, want an object", path, v)
			continue
		}
		var got []string
		for k := range obj {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(keys)
		equal(t, "keys of "+path, got, keys)
	}

	var s Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Totals.Allowed != 3 || s.Totals.Denied != 2 || s.Series[0].PerSecond.Denied[59] != 2 ||
		s.TopKeys[0].Key != "b" || s.Sources[1].Source != "deny_cache" || s.Sources[1].Total != 2 ||
		s.Latency.Count != 3 || s.Breaker.State != "closed" {
		t.Errorf("snapshot %+v", s)
	}
}

// Options.RuleName names the series and top keys of every snapshot; a
// label it does not know keeps no name.
func TestHandlerRuleNames(t *testing.T) {
	c := newClock(t0)
	rec := newTestRecorder(c)
	observe(rec, at(secs(0.5)), 1, Event{Domain: "api", Rule: "api.ip", Key: "a"})
	observe(rec, at(secs(0.5)), 1, Event{Domain: "api", Rule: "api.user", Key: "b"})
	c.set(at(secs(1.5)))
	names := map[[2]string]string{{"api", "api.ip"}: "per_ip"}
	h := Handler(rec, Options{RuleName: func(domain, rule string) string { return names[[2]string{domain, rule}] }})
	var s Snapshot
	if err := json.Unmarshal(get(t, h, "/api/stats").Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range s.Series {
		got = append(got, v.Rule+"="+v.Name)
	}
	for _, k := range s.TopKeys {
		got = append(got, k.Key+":"+k.Rule+"="+k.Name)
	}
	slices.Sort(got)
	equal(t, "names", got, []string{"a:api.ip=per_ip", "api.ip=per_ip", "api.user=", "b:api.user="})
}

func TestHandlerRules(t *testing.T) {
	d, err := config.Parse("api.yaml", []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.New(d)
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(NewRecorder(RecorderOptions{}), Options{Rules: func() any { return cfg.Rules() }})
	w := get(t, h, "/api/rules")
	var rules []config.RuleView
	if err := json.Unmarshal(w.Body.Bytes(), &rules); err != nil || w.Code != http.StatusOK {
		t.Fatalf("GET /api/rules = %d %s: %v", w.Code, w.Body, err)
	}
	if len(rules) != 1 || rules[0].Path != "api.user" || rules[0].RequestsPerUnit != 3 || rules[0].Unit != "minute" {
		t.Errorf("rules %+v", rules)
	}
	if w := get(t, Handler(nil, Options{}), "/api/rules"); strings.TrimSpace(w.Body.String()) != "null" {
		t.Errorf("GET /api/rules without Rules = %q, want null", w.Body)
	}
}

// event reads one server-sent event: its fields, up to the blank line.
func readEvent(t *testing.T, r *bufio.Reader) map[string]string {
	t.Helper()
	ev := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v (so far %v)", err, ev)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev
		}
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("malformed event line %q", line)
		}
		if _, dup := ev[name]; dup {
			t.Fatalf("field %s twice in one event (data must be one line)", name)
		}
		ev[name] = value
	}
}

// openEvents starts a stream of /api/events and returns its reader.
func openEvents(t *testing.T, ctx context.Context, url string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, bufio.NewReader(resp.Body)
}

func TestHandlerEvents(t *testing.T) {
	rec := NewRecorder(RecorderOptions{})
	const interval = 100 * time.Millisecond
	srv := httptest.NewServer(Handler(rec, Options{Interval: interval}))
	defer srv.Close()

	resp, r := openEvents(t, t.Context(), srv.URL)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /api/events = %d, %v", resp.StatusCode, resp.Header)
	}
	first := readEvent(t, r)
	if first["retry"] != "2000" {
		t.Errorf("first event %v lacks retry: 2000", first)
	}
	start := time.Now()
	rec.Observe(Event{Domain: "api", Rule: "api.ip", Key: "k"})
	var last Snapshot
	for i := range 3 {
		ev := readEvent(t, r)
		if _, ok := ev["retry"]; ok {
			t.Errorf("event %d repeats retry", i+1)
		}
		if err := json.Unmarshal([]byte(ev["data"]), &last); err != nil {
			t.Fatalf("event %d data: %v", i+1, err)
		}
	}
	if el := time.Since(start); el < 2*interval {
		t.Errorf("3 events in %v, want one every %v", el, interval)
	}
	if last.Totals.Denied != 1 || last.TopKeys[0].Key != "k" {
		t.Errorf("last event %+v, want the denial", last.Totals)
	}
}

// waitStreams waits until the handler has n open streams.
func waitStreams(t *testing.T, h http.Handler, n int64) {
	t.Helper()
	hh := h.(*handler)
	deadline := time.Now().Add(5 * time.Second)
	for hh.streams.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d open streams after 5 s, want %d", hh.streams.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A client going away ends its stream's handler.
func TestHandlerEventsDisconnect(t *testing.T) {
	h := Handler(NewRecorder(RecorderOptions{}), Options{Interval: time.Hour})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	resp, r := openEvents(t, ctx, srv.URL)
	readEvent(t, r)
	waitStreams(t, h, 1)
	cancel() // the stream waits an hour for its next tick: only the disconnect ends it
	resp.Body.Close()
	waitStreams(t, h, 0)

	// Close blocks until every handler has returned.
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("server Close blocked: a stream handler still runs")
	}
}

// Closing Options.Done ends open streams, as a service's shutdown does.
func TestHandlerEventsDone(t *testing.T) {
	done := make(chan struct{})
	h := Handler(NewRecorder(RecorderOptions{}), Options{Interval: time.Hour, Done: done})
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, r := openEvents(t, t.Context(), srv.URL)
	defer resp.Body.Close()
	readEvent(t, r)
	close(done)
	if _, err := io.ReadAll(r); err != nil {
		t.Errorf("reading to the end of the stream: %v", err)
	}
	waitStreams(t, h, 0)
}

func TestHandlerEventsMaxStreams(t *testing.T) {
	h := Handler(NewRecorder(RecorderOptions{}), Options{Interval: time.Hour, MaxStreams: 1})
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, r := openEvents(t, t.Context(), srv.URL)
	defer resp.Body.Close()
	readEvent(t, r)
	resp2, _ := openEvents(t, t.Context(), srv.URL)
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second stream = %d, want 503", resp2.StatusCode)
	}
	waitStreams(t, h, 1) // the refused one did not count
}

// A server's WriteTimeout does not cut a stream: each write moves the
// deadline.
func TestHandlerEventsWriteTimeout(t *testing.T) {
	srv := httptest.NewUnstartedServer(Handler(NewRecorder(RecorderOptions{}), Options{Interval: 50 * time.Millisecond}))
	srv.Config.WriteTimeout = 150 * time.Millisecond
	srv.Start()
	defer srv.Close()

	resp, r := openEvents(t, t.Context(), srv.URL)
	defer resp.Body.Close()
	start := time.Now()
	for n := 0; time.Since(start) < 500*time.Millisecond; n++ {
		readEvent(t, r) // fails if the server cut the stream
	}
}
