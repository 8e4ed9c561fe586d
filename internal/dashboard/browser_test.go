package dashboard

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit/internal/config"
	"github.com/redlimit/redlimit/memory"
)

var screenshot = flag.String("screenshot", "", "TestBrowser writes a full-page PNG of the dashboard to this file")

// chromiumPath is Debian's chromium, which scripts/ensure-chromium.sh
// installs.
const chromiumPath = "/usr/bin/chromium"

// testRules are the rules of the browser test: the page lists them, and
// the test's /json decides by them.
const testRules = `
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 20}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100}
    shadow_mode: true
---
domain: auth
failure_policy: fail_open
descriptors:
  - key: client_id
    rate_limit: {unit: second, requests_per_unit: 50, algorithm: token_bucket, burst: 100}
`

func loadTestRules(t *testing.T) *config.Config {
	t.Helper()
	var domains []*config.Domain
	for i, doc := range strings.Split(testRules, "---\n") {
		d, err := config.Parse("rules/"+strconv.Itoa(i)+".yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		domains = append(domains, d)
	}
	cfg, err := config.New(domains...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testJSON is a stand-in for the service's POST /json: it decodes a
// RateLimitRequest in protojson, decides each descriptor by the rules with
// a memory store (a limit per descriptor value), records the decisions, and
// answers a RateLimitResponse in protojson, 200 or 429, with X-RateLimit
// headers from the last limited descriptor.
func testJSON(t *testing.T, cfg *config.Config, rec *Recorder) http.Handler {
	store, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
		var req pb.RateLimitRequest
		if err == nil {
			err = protojson.Unmarshal(body, &req)
		}
		if err != nil || req.Domain == "" || len(req.Descriptors) == 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"title":"bad request","status":400}`)
			return
		}
		hits := int64(max(req.HitsAddend, 1))
		resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}
		for _, d := range req.Descriptors {
			entries := make([]config.Entry, len(d.Entries))
			key := req.Domain
			for i, e := range d.Entries {
				entries[i] = config.Entry{Key: e.Key, Value: e.Value}
				key += "|" + e.Key + "=" + e.Value
			}
			rule := cfg.Match(req.Domain, entries)
			if rule == nil || rule.Unlimited {
				resp.Statuses = append(resp.Statuses, &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK})
				continue
			}
			start := time.Now()
			res, err := store.AllowN(r.Context(), key, rule.Limit, hits)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			rec.Observe(Event{Domain: req.Domain, Rule: rule.Path, Key: entries[len(entries)-1].Value,
				Allowed: res.Allowed, Shadow: rule.Shadow, Source: res.Source, Latency: time.Since(start)})
			st := &pb.RateLimitResponse_DescriptorStatus{
				Code: pb.RateLimitResponse_OK,
				CurrentLimit: &pb.RateLimitResponse_RateLimit{
					Name:            rule.Name,
					RequestsPerUnit: uint32(rule.Limit.Count),
					Unit:            pb.RateLimitResponse_RateLimit_Unit(pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rule.Unit)]),
				},
				LimitRemaining:     uint32(res.Remaining),
				DurationUntilReset: durationpb.New(res.ResetAfter),
			}
			if !res.Allowed && !rule.Shadow {
				st.Code = pb.RateLimitResponse_OVER_LIMIT
				resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
			}
			resp.Statuses = append(resp.Statuses, st)
			resp.ResponseHeadersToAdd = []*core.HeaderValue{
				{Key: "X-RateLimit-Limit", Value: strconv.FormatInt(rule.Limit.Count, 10)},
				{Key: "X-RateLimit-Remaining", Value: strconv.FormatInt(res.Remaining, 10)},
				{Key: "X-RateLimit-Reset", Value: strconv.FormatInt(int64(res.ResetAfter.Round(time.Second)/time.Second), 10)},
			}
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, h := range resp.ResponseHeadersToAdd {
			w.Header().Set(h.Key, h.Value)
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// TestBrowser loads the dashboard in headless Chromium against a server
// with live traffic: the counters move, the rules show, and the try form
// gets OK three times and then OVER_LIMIT for a 3-a-minute descriptor.
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("this test needs Chromium at %s: run `make test` (which installs it) or `apt-get install chromium` (%v)", chromiumPath, err)
	}
	cfg := loadTestRules(t)
	rec := NewRecorder(RecorderOptions{})
	tr := newTraffic(rec)
	tr.backfill(time.Now())

	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("POST /json", testJSON(t, cfg, rec))
	mux.Handle("/", Handler(rec, Options{Rules: func() any { return map[string]any{"rules": cfg.Rules()} }, Done: done}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(done) // before srv.Close: ends the page's event stream

	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	wg.Go(func() { tr.run(stop, 50*time.Millisecond) })

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc() // waits for Chromium to exit, before TempDir is removed
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	// Any uncaught exception in the page fails the test. (Subscribing
	// starts Chromium.)
	start := time.Now()
	var exMu sync.Mutex
	var exceptions []string
	thrown := chromedp.Events(bctx, runtime.ExceptionThrown)
	wg.Go(func() {
		for ev, err := range thrown {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			exMu.Lock()
			exceptions = append(exceptions, msg)
			exMu.Unlock()
		}
	})
	defer func() {
		exMu.Lock()
		defer exMu.Unlock()
		for _, e := range exceptions {
			t.Errorf("exception in the page: %s", e)
		}
	}()

	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("total-decisions")),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	t.Logf("Chromium started and the page loaded in %v", time.Since(start).Round(time.Millisecond))

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	// waitText polls until sel's text satisfies ok.
	waitText := func(sel, what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := text(sel)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %q after 10 s, want %s", sel, s, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	count := func(s string) int64 {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("decision count %q: %v", s, err)
		}
		return n
	}

	// Live: the event stream connects, and the counters move.
	waitText("#conn", "live", func(s string) bool { return s == "live" })
	first := count(waitText("#total-decisions", "above 0", func(s string) bool { return s != "0" }))
	time.Sleep(1100 * time.Millisecond)
	second := count(text("#total-decisions"))
	if second <= first {
		t.Errorf("decisions %d, then %d a second later: the counters do not move", first, second)
	}
	t.Logf("decisions %d, then %d a second later", first, second)

	// The other panels are filled.
	for sel, want := range map[string]string{
		"#series-table tbody": "api.remote_address.path_/login",
		"#top-keys tbody":     "203.0.",
		"#sources tbody":      "deny cache",
		"#rules":              "api.user",
		"#breaker":            "closed",
	} {
		waitText(sel, "to contain "+want, func(s string) bool { return strings.Contains(s, want) })
	}
	if s := text("#latency-summary"); !strings.Contains(s, "/") {
		t.Errorf("latency %q, want p50 / p99", s)
	}

	// The try form: 3 a minute for user=…, so the fourth is over limit.
	user := "e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("try-domain"), "api"),
		chromedp.SetValue(chromedp.ID("try-entries"), "user="+user),
		chromedp.SetValue(chromedp.ID("try-hits"), "1"),
	); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if err := chromedp.Do(bctx,
			chromedp.Click(chromedp.ID("try-submit")),
			chromedp.WaitVisible(chromedp.CSS(`#try-result[data-seq="`+strconv.Itoa(i)+`"]`)),
		); err != nil {
			t.Fatalf("submitting the try form, time %d: %v", i, err)
		}
		want := "OK"
		if i == 4 {
			want = "OVER_LIMIT"
		}
		if got := text("#try-overall"); got != want {
			t.Errorf("try %d: overall %q, want %q (bodies: %s)", i, got, want, text("#try-bodies"))
		}
	}
	if s := text("#try-status"); !strings.HasPrefix(s, "429") {
		t.Errorf("HTTP status %q, want 429", s)
	}
	if s := text("#try-statuses tbody"); !strings.Contains(s, "OVER_LIMIT") || !strings.Contains(s, "3 / minute") {
		t.Errorf("statuses %q, want OVER_LIMIT with 3 / minute", s)
	}
	if s := text("#try-headers tbody"); !strings.Contains(strings.ToLower(s), "x-ratelimit-remaining") {
		t.Errorf("response headers %q lack x-ratelimit-remaining", s)
	}

	if *screenshot != "" {
		time.Sleep(1500 * time.Millisecond) // one more update with the try requests
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", *screenshot, len(png))
	}
	// When event streams fail (here: too many open), the page polls.
	full := Handler(rec, Options{MaxStreams: 1, Done: done})
	srv2 := httptest.NewServer(full)
	defer srv2.Close()
	hold, holdCancel := context.WithCancel(ctx)
	defer holdCancel()
	resp, r := openEvents(t, hold, srv2.URL) // takes the only stream
	defer resp.Body.Close()
	readEvent(t, r)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv2.URL+"/")); err != nil {
		t.Fatalf("loading the page again: %v", err)
	}
	waitText("#conn", "polling", func(s string) bool { return s == "polling" })
	first = count(waitText("#total-decisions", "above 0", func(s string) bool { return s != "0" }))
	waitText("#total-decisions", "above "+strconv.FormatInt(first, 10), func(s string) bool { return count(s) > first })

	if err := chromedp.Cancel(bctx); err != nil {
		t.Errorf("closing Chromium: %v", err)
	}
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}
