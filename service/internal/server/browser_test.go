package server

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/ratelimitfield"
)

var screenshot = flag.String("screenshot", "", "TestDashboardBrowser writes a full-page PNG of the dashboard to this `file`, after a minute of traffic\n(go test ./service/internal/server -run TestDashboardBrowser -screenshot $PWD/docs/img/dashboard.png)")

// chromiumPath is Debian's chromium, which scripts/ensure-chromium.sh
// installs.
const chromiumPath = "/usr/bin/chromium"

// browserRules are the rules of the browser test, one file per domain.
var browserRules = map[string]string{
	"api.yaml": `domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per_ip, unit: second, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_log}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 5}
    shadow_mode: true
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 1000, time_zone: Europe/Berlin}
  - key: batch
    rate_limit: {unit: hour, unit_multiplier: 6, requests_per_unit: 10}
`,
	"auth.yaml": `domain: auth
failure_policy: fail_open
descriptors:
  - key: client_id
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: token_bucket, burst: 8}
`,
}

// TestDashboardBrowser loads the dashboard of a running service (on Redis,
// with traffic over gRPC) in headless Chromium: the counters move, every
// panel fills, the try form gets OK three times and then OVER_LIMIT (429)
// for a 3-a-minute descriptor, and when event streams are refused the page
// polls. An uncaught exception in the page fails it.
func TestDashboardBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("this test needs Chromium at %s: run `make test` (which runs scripts/ensure-chromium.sh, installing it as root) or `sudo apt-get install chromium` (%v)", chromiumPath, err)
	}
	t.Parallel()
	began := time.Now()
	redis := redistest.Shared(t)
	dir := t.TempDir()
	for name, rules := range browserRules {
		writeFile(t, filepath.Join(dir, name), rules)
	}
	r := start(t, Options{
		ConfigPath: dir, RedisURL: "redis://" + redis.Addr(), RedisPrefix: fmt.Sprintf("browser%d:", time.Now().UnixNano()),
		Headers: ratelimitfield.X,
		Timeout: 2 * time.Second, // Redis answers, however loaded the machine
	})
	page := "http://" + r.HTTPAddr() + "/"
	startTraffic(t, pb.NewRateLimitServiceClient(r.conn))
	b := startBrowser(t)

	b.do("loading the page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("total-decisions")))
	t.Logf("Chromium started and the page loaded in %v", time.Since(began).Round(time.Millisecond))

	// Live: the event stream connects, and the counters move.
	b.waitText("#conn", "live", func(s string) bool { return s == "live" })
	first := b.count("#total-decisions", func(n int64) bool { return n > 0 }, "above 0")
	second := b.count("#total-decisions", func(n int64) bool { return n > first }, "above "+strconv.FormatInt(first, 10))
	t.Logf("decisions: %d, then %d", first, second)

	// Every panel fills with what the service decided.
	for _, p := range []struct{ sel, want string }{
		{"#series-table tbody", "api.remote_address.path_/login"},
		{"#series-table tbody", "auth.client_id"},
		{"#series-table tbody", "per_ip"}, // api.remote_address, by its name
		{"#top-keys tbody", "remote_address=10.0.0."},
		{"#top-keys tbody", "user=user-"},
		{"#rules", "api.user"},
		{"#rules", "fail_open"},
		{"#rules", "1000 / calendar month Europe/Berlin"},
		{"#rules", "10 / 6 hours"},
		{"#breaker", "closed"},
		{"#latency-summary", " / "},
	} {
		b.waitText(p.sel, "to contain "+p.want, func(s string) bool { return strings.Contains(s, p.want) })
	}
	b.waitText("#rate-denied", "above 0", func(s string) bool { return s != "0" && s != "0.0" })
	// By path: rows in the order of redlimit.Source, the total third.
	for row, name := range []string{"store", "deny cache"} {
		sel := fmt.Sprintf("#sources tbody tr:nth-child(%d) td:nth-child(3)", row+1)
		b.count(sel, func(n int64) bool { return n > 0 }, "decisions by the "+name+" above 0")
	}

	tryUntilDenied(t, b)

	if *screenshot != "" {
		takeScreenshot(t, b, began)
	}
	pollingFallback(t, b, r.HTTPAddr())

	if err := chromedp.Cancel(b.ctx); err != nil {
		t.Errorf("closing Chromium: %v", err)
	}
	t.Logf("browser test took %v", time.Since(began).Round(time.Millisecond))
}

// tryUntilDenied submits the try form for a fresh user (3 a minute) until
// the service denies it: OK three times, then OVER_LIMIT with HTTP 429.
func tryUntilDenied(t *testing.T, b *browser) {
	t.Helper()
	user := "try-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b.do("filling the try form",
		chromedp.SetValue(chromedp.ID("try-domain"), "api"),
		chromedp.SetValue(chromedp.ID("try-entries"), "user="+user),
		chromedp.SetValue(chromedp.ID("try-hits"), "1"))
	var got []string
	for i := 1; i <= 6 && !strings.Contains(strings.Join(got, " "), "OVER_LIMIT"); i++ {
		b.do("submitting the try form, time "+strconv.Itoa(i),
			chromedp.Click(chromedp.ID("try-submit")),
			chromedp.WaitVisible(chromedp.CSS(`#try-result[data-seq="`+strconv.Itoa(i)+`"]`)))
		got = append(got, b.text("#try-overall"))
	}
	if strings.Join(got, " ") != "OK OK OK OVER_LIMIT" {
		t.Fatalf("try form answers %q, want OK three times, then OVER_LIMIT (bodies: %s)", got, b.text("#try-bodies"))
	}
	if s := b.text("#try-status"); !strings.HasPrefix(s, "429") {
		t.Errorf("HTTP status %q, want 429", s)
	}
	if s := b.text("#try-statuses tbody"); !strings.Contains(s, "OVER_LIMIT") || !strings.Contains(s, "3 / minute") {
		t.Errorf("statuses %q, want OVER_LIMIT with 3 / minute", s)
	}
	if s := b.text("#try-headers tbody"); !strings.Contains(strings.ToLower(s), "x-ratelimit-remaining") {
		t.Errorf("response headers %q lack x-ratelimit-remaining", s)
	}
}

// takeScreenshot writes the full page to *screenshot once the charts hold
// about a minute of traffic.
func takeScreenshot(t *testing.T, b *browser, began time.Time) {
	t.Helper()
	if wait := time.Until(began.Add(65 * time.Second)); wait > 0 {
		t.Logf("screenshot: %v more traffic first, for the charts", wait.Round(time.Second))
		time.Sleep(wait)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("taking a screenshot: %v", err)
	}
	if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", *screenshot, len(png))
}

// pollingFallback loads the page through a proxy that refuses event
// streams with 503, as the dashboard does past Options.MaxStreams: the page
// polls /api/stats instead, and its counters still move.
func pollingFallback(t *testing.T, b *browser, httpAddr string) {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: httpAddr})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/api/events" {
			http.Error(w, "too many event streams; poll /api/stats", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	defer srv.Close()
	b.do("loading the page without event streams", chromedp.Navigate(srv.URL+"/"))
	b.waitText("#conn", "polling", func(s string) bool { return s == "polling" })
	first := b.count("#total-decisions", func(n int64) bool { return n > 0 }, "above 0")
	b.count("#total-decisions", func(n int64) bool { return n > first }, "above "+strconv.FormatInt(first, 10))
	// Leave the proxied page before the proxy closes.
	b.do("leaving the page", chromedp.Navigate("about:blank"))
}

// traffic is the browser test's load, over gRPC: requests of domain api
// from a few hot addresses among many (Zipf), some to /login, some for a
// user among many (Zipf) and some for a tenant; and requests of domain auth
// from API clients, one of them hot. Its rate swells and ebbs, so that the
// charts are not flat, and every rule denies some.
type traffic struct {
	client pb.RateLimitServiceClient
	rng    *rand.Rand
	ips    *rand.Zipf
	users  *rand.Zipf
	sent   atomic.Int64
	failed atomic.Int64
	err    atomic.Pointer[error]
}

// startTraffic sends traffic until the end of the test, and then checks
// that the service answered it.
func startTraffic(t *testing.T, client pb.RateLimitServiceClient) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	tr := &traffic{client: client, rng: rng, ips: rand.NewZipf(rng, 1.4, 1, 199), users: rand.NewZipf(rng, 1.1, 2, 4999)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		t.Logf("traffic: %d requests, %d failed", tr.sent.Load(), tr.failed.Load())
		if err := tr.err.Load(); err != nil {
			t.Errorf("%d of %d requests failed; one: %v", tr.failed.Load(), tr.sent.Load(), *err)
		}
	})
}

// baseRate is the traffic's mean rate, in requests per second.
const baseRate = 60

// run sends requests every 50 ms, at baseRate swelling and ebbing by half,
// until ctx ends.
func (tr *traffic) run(ctx context.Context) {
	const tick = 50 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			since := now.Sub(start).Seconds()
			owed += baseRate * tick.Seconds() * (1 + 0.5*math.Sin(since/8))
			for ; owed >= 1; owed-- {
				tr.send(ctx)
			}
		}
	}
}

// send sends one request and counts it.
func (tr *traffic) send(ctx context.Context) {
	_, err := tr.client.ShouldRateLimit(ctx, tr.request())
	tr.sent.Add(1)
	if err != nil && ctx.Err() == nil {
		tr.failed.Add(1)
		tr.err.Store(&err)
	}
}

// request makes the next request.
func (tr *traffic) request() *pb.RateLimitRequest {
	if tr.rng.Float64() < 0.25 {
		client := 0 // half of the calls, about 7 a second: over its 4
		if tr.rng.Float64() < 0.5 {
			client = 1 + tr.rng.IntN(5)
		}
		return &pb.RateLimitRequest{Domain: "auth", Descriptors: []*rlpb.RateLimitDescriptor{descriptor("client_id", "client-"+strconv.Itoa(client))}}
	}
	n := tr.ips.Uint64()
	ip := "10.0." + strconv.FormatUint(n/250, 10) + "." + strconv.FormatUint(n%250+1, 10)
	ds := []*rlpb.RateLimitDescriptor{descriptor("remote_address", ip)}
	if tr.rng.Float64() < 0.15 {
		ds = append(ds, descriptor("user", "user-"+strconv.FormatUint(tr.users.Uint64(), 10)))
	}
	if tr.rng.Float64() < 0.1 {
		ds = append(ds, descriptor("remote_address", ip, "path", "/login"))
	}
	if tr.rng.Float64() < 0.4 {
		ds = append(ds, descriptor("tenant", []string{"acme", "globex", "initech"}[tr.rng.IntN(3)]))
	}
	return &pb.RateLimitRequest{Domain: "api", Descriptors: ds}
}

func descriptor(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// browser is headless Chromium, driven by chromedp. Uncaught exceptions in
// its pages fail the test.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	exceptions []string
}

// startBrowser starts Chromium with a fresh profile; it is closed at the end
// of the test, and its profile removed.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	profile := t.TempDir()
	timeout := 3 * time.Minute
	if *screenshot != "" {
		timeout += 2 * time.Minute // a minute of traffic first
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
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
		chromedp.UserDataDir(profile),
	)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: bctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for Chromium to exit, before the profile is removed
		cancel()
		wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.exceptions {
			t.Errorf("exception in the page: %s", e)
		}
	})
	// Subscribing starts Chromium.
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
			b.mu.Lock()
			b.exceptions = append(b.exceptions, msg)
			b.mu.Unlock()
		}
	})
	return b
}

// do runs actions, failing the test with what they were for.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text returns the text of the element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// waitTimeout bounds every wait for the page: it updates every second, but
// the machine may be loaded.
const waitTimeout = 20 * time.Second

// waitText polls until the text of sel satisfies ok, and returns it.
func (b *browser) waitText(sel, what string, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		s := b.text(sel)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s is %q after %v, want %s", sel, s, waitTimeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// count polls until the number sel shows ("12,345") satisfies ok, and
// returns it.
func (b *browser) count(sel string, ok func(int64) bool, what string) int64 {
	b.t.Helper()
	var n int64
	b.waitText(sel, what, func(s string) bool {
		var err error
		n, err = strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		return err == nil && ok(n)
	})
	return n
}
