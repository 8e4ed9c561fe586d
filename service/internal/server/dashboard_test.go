package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/dashboard"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// newTestObserver returns an observer on fresh metrics and a recorder whose
// clock stands at now (a whole second, plus 0.5 s) until moved.
func newTestObserver(t *testing.T) (observer, *atomic.Int64) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(time.Unix(1_700_000_000, 5e8).UnixNano())
	rec := dashboard.NewRecorder(dashboard.RecorderOptions{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	return observer{metrics: m, rec: rec}, &clock
}

func entries(kv ...string) []*rlpb.RateLimitDescriptor_Entry {
	var es []*rlpb.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return es
}

// The dashboard gets every limited descriptor, and the keys of denials and
// shadow denials as their entries; unlimited descriptors are not counted.
func TestObserverDescriptors(t *testing.T) {
	t.Parallel()
	o, _ := newTestObserver(t)
	ip := entries("remote_address", "10.0.0.1")
	user := entries("tenant", "acme", "user", "u1")
	for _, d := range []struct {
		rule    string
		outcome rls.Outcome
		entries []*rlpb.RateLimitDescriptor_Entry
		n       int
	}{
		{"api.remote_address", rls.Allowed, ip, 3},
		{"api.remote_address", rls.Denied, ip, 2},
		{"api.tenant_acme.user", rls.ShadowDenied, user, 1},
		{"api.remote_address_127.0.0.1", rls.Unlimited, entries("remote_address", "127.0.0.1"), 5},
	} {
		for range d.n {
			o.Descriptor("api", d.rule, d.outcome, redlimit.FromStore, d.entries)
		}
	}
	s := o.rec.Snapshot()
	if want := (dashboard.Counts{Allowed: 3, Denied: 2, ShadowDenied: 1}); s.Totals != want {
		t.Errorf("totals %+v, want %+v", s.Totals, want)
	}
	var rules []string
	for _, se := range s.Series {
		rules = append(rules, se.Rule)
	}
	if want := []string{"api.remote_address", "api.tenant_acme.user"}; !reflect.DeepEqual(rules, want) {
		t.Errorf("series %q, want %q (no unlimited rule)", rules, want)
	}
	keys := map[string]uint64{}
	for _, k := range s.TopKeys {
		keys[k.Rule+" "+k.Key] = k.Count
	}
	if want := map[string]uint64{"api.remote_address remote_address=10.0.0.1": 2, "api.tenant_acme.user tenant=acme,user=u1": 1}; !reflect.DeepEqual(keys, want) {
		t.Errorf("top keys %v, want %v", keys, want)
	}
}

// Each backend call's latency is recorded once, unless the deny cache
// answered it without asking the store; a call that failed, or that a
// failure policy answered, is a backend error.
func TestObserverBackend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		src     redlimit.Source
		err     error
		calls   uint64 // latencies recorded
		wantErr string // "": no backend error
	}{
		{"store", redlimit.FromStore, nil, 1, ""},
		{"deny cache", redlimit.FromDenyCache, nil, 0, ""},
		{"local fallback", redlimit.FromLocal, nil, 1, "the local fallback answered"},
		{"fail open", redlimit.FromFailOpen, nil, 1, "fail_open allowed"},
		{"fail closed", redlimit.FromFailClosed, nil, 1, "fail_closed denied"},
		{"error", redlimit.FromStore, errors.New("redis: i/o timeout"), 1, "redis: i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, clock := newTestObserver(t)
			o.Backend(3*time.Millisecond, tc.src, tc.err)
			clock.Add(int64(time.Second)) // latency percentiles cover complete seconds
			s := o.rec.Snapshot()
			if s.Latency.Count != tc.calls || tc.calls > 0 && (s.Latency.P50 < 2.5 || s.Latency.P50 > 3.5) {
				t.Errorf("latency: %d calls, p50 %.2f ms; want %d of 3 ms", s.Latency.Count, s.Latency.P50, tc.calls)
			}
			wantTotal := uint64(0)
			if tc.wantErr != "" {
				wantTotal = 1
			}
			if s.Errors.Total != wantTotal || !strings.Contains(s.Errors.Last, tc.wantErr) {
				t.Errorf("backend errors %d, last %q; want %d, %q", s.Errors.Total, s.Errors.Last, wantTotal, tc.wantErr)
			}
		})
	}
}

// The dashboard adds no allocation to the metrics' on the common paths: an
// allowed descriptor, a call the store answered, and one the local
// fallback answered (its error is made once). Not parallel: allocations
// are counted process-wide.
func TestObserverAllocs(t *testing.T) {
	o, _ := newTestObserver(t)
	var withDashboard, metricsOnly rls.Observer = o, o.metrics // as New makes them, once
	ip := entries("remote_address", "10.0.0.1")
	for _, tc := range []struct {
		name string
		call func(rls.Observer)
	}{
		{"allowed descriptor", func(ob rls.Observer) {
			ob.Descriptor("api", "api.remote_address", rls.Allowed, redlimit.FromStore, ip)
		}},
		{"backend call", func(ob rls.Observer) { ob.Backend(time.Millisecond, redlimit.FromStore, nil) }},
		{"local fallback", func(ob rls.Observer) { ob.Backend(time.Millisecond, redlimit.FromLocal, nil) }},
	} {
		without := testing.AllocsPerRun(500, func() { tc.call(metricsOnly) })
		with := testing.AllocsPerRun(500, func() { tc.call(withDashboard) })
		if with > without {
			t.Errorf("%s: %v allocations with the dashboard, %v without", tc.name, with, without)
		}
	}
}

// The dashboard is served at /, after the service's own routes, with the
// rules of GET /rules and the service's decisions; NoDashboard turns it
// off.
func TestDashboardRoutes(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoDashboard=%v", off), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "rules.yaml")
			writeFile(t, path, fmt.Sprintf(ruleFile, 2))
			r := start(t, Options{ConfigPath: path, NoDashboard: off})
			for range 3 {
				r.decide(t, "ip", "1.1.1.1") // 2 an hour: the third is denied
			}
			if code, body := r.getBody(t, "/healthz"); code != 200 || body != "ok\n" {
				t.Errorf("/healthz: %d %q", code, body)
			}
			for _, p := range []string{"/", "/static/app.js", "/api/stats", "/api/rules"} {
				if code, want := r.get(t, p), map[bool]int{false: 200, true: 404}[off]; code != want {
					t.Errorf("GET %s: %d, want %d", p, code, want)
				}
			}
			if off {
				return
			}
			if _, page := r.getBody(t, "/"); !strings.Contains(page, `data-json-path="/json"`) {
				t.Errorf("the page does not post its try form to /json:\n%s", page)
			}
			if rules, dash := decodeJSON(t, r, "/rules"), decodeJSON(t, r, "/api/rules"); !reflect.DeepEqual(rules, dash) {
				t.Errorf("/api/rules\n%v\nis not /rules\n%v", dash, rules)
			}
			var s dashboard.Snapshot
			_, body := r.getBody(t, "/api/stats")
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				t.Fatalf("/api/stats: %v\n%s", err, body)
			}
			if s.Totals != (dashboard.Counts{Allowed: 2, Denied: 1}) || len(s.TopKeys) != 1 || s.TopKeys[0].Key != "ip=1.1.1.1" {
				t.Errorf("/api/stats: totals %+v, top keys %+v; want 2 allowed, 1 denied, of ip=1.1.1.1", s.Totals, s.TopKeys)
			}
			if s.Breaker.State != "" || s.Errors.Total != 0 {
				t.Errorf("on memory: breaker %q, %d backend errors; want none", s.Breaker.State, s.Errors.Total)
			}
		})
	}
}

func decodeJSON(t *testing.T, r *running, path string) any {
	t.Helper()
	code, body := r.getBody(t, path)
	var v any
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("GET %s: %d %v\n%s", path, code, err, body)
	}
	return v
}

// An open event stream ends when the server shuts down, instead of holding
// the shutdown until its timeout.
func TestDashboardStreamEndsAtShutdown(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 30 * time.Second
	r := start(t, Options{ShutdownTimeout: shutdownTimeout})
	resp, err := http.Get("http://" + r.HTTPAddr() + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry: ") {
		t.Fatalf("the stream's first line: %q, %v; want retry: …", line, err)
	}
	start := time.Now()
	r.stop(t)
	if took := time.Since(start); took > shutdownTimeout/2 {
		t.Errorf("shutdown took %v with a dashboard open (timeout %v)", took, shutdownTimeout)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("the stream after the shutdown: %v, want its end", err)
	}
	if logs := r.logs.String(); strings.Contains(logs, "cut off") {
		t.Errorf("requests cut off at the shutdown:\n%s", logs)
	}
}

// Issue 27: the dashboard labelled a rule by its path (web.ip) though the
// rule file names it (per_ip). Its series and top keys carry the name,
// which follows a reload; the path stays, for the metrics' label.
func TestDashboardRuleNames(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1))
	r := start(t, Options{ConfigPath: path})
	names := func() (series, top []string) {
		t.Helper()
		var s struct {
			Series  []struct{ Rule, Name string } `json:"series"`
			TopKeys []struct{ Rule, Name string } `json:"top_keys"`
		}
		_, body := r.getBody(t, "/api/stats")
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("/api/stats: %v\n%s", err, body)
		}
		for _, v := range s.Series {
			series = append(series, v.Rule+" "+v.Name)
		}
		for _, v := range s.TopKeys {
			top = append(top, v.Rule+" "+v.Name)
		}
		return series, top
	}
	r.decide(t, "ip", "1.1.1.1")
	r.decide(t, "ip", "1.1.1.1") // denied: a top key
	if series, top := names(); !reflect.DeepEqual(series, []string{"web.ip per_ip"}) || !reflect.DeepEqual(top, []string{"web.ip per_ip"}) {
		t.Errorf("series %q, top keys %q; want the path and the name per_ip", series, top)
	}
	writeFile(t, path, strings.Replace(fmt.Sprintf(ruleFile, 1), "name: per_ip", "name: per_address", 1))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if series, _ := names(); !reflect.DeepEqual(series, []string{"web.ip per_address"}) {
		t.Errorf("after a reload renaming the rule: series %q, want web.ip per_address", series)
	}
}
