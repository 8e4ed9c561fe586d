package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/redlimit/redlimit/internal/redistest"
)

// apiRules covers the keys of the format: nested descriptors, wildcards,
// replaces, unlimited, shadow_mode, and redlimit's algorithm extension.
const apiRules = `domain: api
descriptors:
  - key: remote_address
    rate_limit:
      name: per_ip
      unit: minute
      requests_per_unit: 3
      algorithm: sliding_log
  - key: remote_address
    value: 10.0.0.1
    rate_limit:
      unlimited: true
  - key: path
    value: /search*
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit:
          name: acme_user
          unit: hour
          requests_per_unit: 2
          algorithm: fixed_window
  - key: route
    rate_limit:
      name: route
      unit: minute
      requests_per_unit: 100
      replaces:
        - name: per_ip
`

func TestServeGRPCAndJSON(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "api.yaml")
	writeFile(t, cfg, apiRules)
	// A deadline long enough that Redis answers every call on a loaded machine,
	// so that the counts below are the store's.
	p := startProc(t, nil, "--config="+cfg, "--redis=redis://"+redis.Addr(), "--response-headers=x-ratelimit", "--timeout=5s")
	checkServeGRPCAndJSON(t, p)
}

// checkServeGRPCAndJSON runs the checks of TestServeGRPCAndJSON on p, which
// serves apiRules on a Redis of its own, with X-RateLimit-* headers.
func checkServeGRPCAndJSON(t *testing.T, p *proc) {
	t.Helper()
	ctx := context.Background()
	codes := func(resp *pb.RateLimitResponse, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		s := resp.OverallCode.String() + ":"
		for _, st := range resp.Statuses {
			s += " " + st.Code.String()
		}
		return s
	}
	for i, want := range []string{"OK: OK", "OK: OK", "OK: OK", "OVER_LIMIT: OVER_LIMIT"} {
		if got := codes(p.ask(ctx, "api", desc("remote_address", "1.2.3.4"))); got != want {
			t.Fatalf("per_ip %d: %s, want %s", i, got, want)
		}
	}
	// Unlimited, a shadow wildcard, unknown domain, no match.
	resp, err := p.ask(ctx, "api", desc("remote_address", "10.0.0.1"), desc("path", "/search/x"), desc("path", "/search/x"), desc("nothing", "x"))
	if got := codes(resp, err); got != "OK: OK OK OK OK" || resp.Statuses[0].LimitRemaining != 4294967295 {
		t.Fatalf("unlimited and shadow: %s %v", got, resp)
	}
	if got := codes(p.ask(ctx, "elsewhere", desc("remote_address", "1.2.3.4"))); got != "OK: OK" {
		t.Fatalf("unknown domain: %s", got)
	}
	// replaces: route replaces per_ip, whose address is exhausted.
	if got := codes(p.ask(ctx, "api", desc("remote_address", "1.2.3.4"), desc("route", "r"))); got != "OK: OK OK" {
		t.Fatalf("route replacing per_ip: %s", got)
	}
	// Nested: tenant acme, user: 2 an hour, and one request over its limit
	// consumes nothing of its other descriptor.
	user := desc("tenant", "acme", "user", "u")
	codes(p.ask(ctx, "api", user))
	codes(p.ask(ctx, "api", user))
	for range 3 {
		if got := codes(p.ask(ctx, "api", desc("remote_address", "5.5.5.5"), user)); got != "OVER_LIMIT: OK OVER_LIMIT" {
			t.Fatalf("exhausted user with a fresh address: %s", got)
		}
	}
	resp, err = p.ask(ctx, "api", desc("remote_address", "5.5.5.5"))
	if codes(resp, err) != "OK: OK" || resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("the address consumed while denied: %v", resp)
	}
	hdr := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		hdr[h.Key] = h.Value
	}
	if hdr["X-RateLimit-Limit"] != "3" || hdr["X-RateLimit-Remaining"] != "2" || hdr["X-RateLimit-Reset"] != "60" {
		t.Fatalf("headers %v", hdr)
	}

	// /json, the same messages.
	body, _ := protojson.Marshal(&pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "1.2.3.4")}})
	code, ctype, out := p.post(body)
	var jr pb.RateLimitResponse
	if err := protojson.Unmarshal([]byte(out), &jr); code != 429 || ctype != "application/json" || err != nil || jr.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("/json over limit: %d %s %s", code, ctype, out)
	}
	body, _ = protojson.Marshal(&pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "9.9.9.9")}})
	if code, _, out := p.post(body); code != 200 || !strings.Contains(out, `"limitRemaining":2`) {
		t.Fatalf("/json OK: %d %s", code, out)
	}

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		if code, body := p.get(path); code != 200 || body != want {
			t.Fatalf("%s: %d %q", path, code, body)
		}
	}
	code, rules := p.get("/rules")
	var rv struct{ Rules []map[string]any }
	if err := json.Unmarshal([]byte(rules), &rv); code != 200 || err != nil || len(rv.Rules) != 5 {
		t.Fatalf("/rules: %d %v %s", code, err, rules)
	}
	for series, want := range map[string]float64{
		`redlimit_rls_decisions_total{domain="api",outcome="denied",rule="api.remote_address"}`:             2, // gRPC and /json
		`redlimit_rls_decisions_total{domain="api",outcome="shadow_denied",rule="api.path_/search*"}`:       2, // one limit of cost 2, two descriptors
		`redlimit_rls_decisions_total{domain="api",outcome="unlimited",rule="api.remote_address_10.0.0.1"}`: 1,
		// Two requests of two descriptors (user and address) and one /json
		// request, answered from the deny cache.
		`redlimit_rls_decisions_by_source_total{source="deny_cache"}`: 5,
		`redlimit_breaker_state{state="closed"}`:                      1,
		`redlimit_config_rules`:                                       5,
	} {
		if got := p.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	hc, err := healthpb.NewHealthClient(p.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health: %v %v", hc, err)
	}
}

// exactRules are four limits of 100, one per algorithm, over periods long
// enough that no window or token comes back during the test.
const exactRules = `domain: exact
descriptors:
  - key: alg
    value: sliding_log
    rate_limit:
      unit: hour
      requests_per_unit: 100
      algorithm: sliding_log
  - key: alg
    value: fixed_window
    rate_limit:
      unit: day
      requests_per_unit: 100
      algorithm: fixed_window
  - key: alg
    value: token_bucket
    rate_limit:
      unit: day
      requests_per_unit: 100
      algorithm: token_bucket
  - key: alg
    value: sliding_window
    rate_limit:
      unit: hour
      requests_per_unit: 100
      algorithm: sliding_window
`

// Three instances on one Redis, hammered concurrently on one descriptor per
// algorithm, admit exactly the limit: the sliding log, the fixed window and
// the token bucket are exact, and so is the sliding window while its
// previous window is empty (a fresh key).
func TestThreeInstancesExact(t *testing.T) {
	t.Parallel()
	// Keep clear of the hour and day boundaries (windows align to the epoch).
	if s := time.Now().Unix() % 3600; s < 10 || s > 3590 {
		time.Sleep(time.Duration(3600-s+10) % 3600 * time.Second)
	}
	redis := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "exact.yaml")
	writeFile(t, cfg, exactRules)
	var procs []*proc
	for range 3 {
		// A deadline long enough that Redis always answers on this loaded
		// machine: past it, the failure policy (this node's share, locally)
		// would decide, which is not exact by design.
		procs = append(procs, startProc(t, nil, "--config="+cfg, "--redis=redis://"+redis.Addr(), "--timeout=10s"))
	}
	algs := []string{"sliding_log", "fixed_window", "token_bucket", "sliding_window"}
	const perWorker, workers = 25, 16 // 400 requests per algorithm, 4x the limit
	var admitted [3][4]atomic.Int64
	var wg sync.WaitGroup
	for pi, p := range procs {
		for w := range workers {
			wg.Go(func() {
				for i := range perWorker * len(algs) {
					a := (i + w) % len(algs)
					resp, err := p.ask(context.Background(), "exact", desc("alg", algs[a]))
					if err != nil {
						t.Errorf("instance %d: %v", pi, err)
						return
					}
					if resp.OverallCode == pb.RateLimitResponse_OK {
						admitted[pi][a].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for a, alg := range algs {
		var total int64
		var per []int64
		for pi := range procs {
			n := admitted[pi][a].Load()
			per = append(per, n)
			total += n
		}
		t.Logf("%s: %d admitted (%v per instance) of %d", alg, total, per, 3*workers*perWorker)
		if total != 100 {
			t.Errorf("%s: %d admitted by three instances, want exactly 100", alg, total)
		}
	}
	for i, p := range procs {
		for _, src := range []string{"local", "fail_open", "fail_closed"} {
			if n := p.metric(`redlimit_rls_decisions_by_source_total{source="` + src + `"}`); n > 0 {
				t.Errorf("instance %d: %v decisions by %s", i, n, src)
			}
		}
	}
}

// A good and a broken configuration reloaded under load: every request is
// answered, by the new configuration once it loads, and by the old one
// while the broken one is rejected.
func TestHotReloadUnderLoad(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	dir := t.TempDir()
	rules := func(n int) string {
		return fmt.Sprintf("domain: hot\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: %d\n", n)
	}
	// A ConfigMap volume: hot.yaml -> ..data/hot.yaml, ..data -> ..v1.
	swap := func(version, data string) {
		t.Helper()
		d := filepath.Join(dir, version)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "hot.yaml"), data)
		if err := os.Symlink(version, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap("..v1", rules(1_000_000))
	if err := os.Symlink(filepath.Join("..data", "hot.yaml"), filepath.Join(dir, "hot.yaml")); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, nil, "--config="+dir, "--redis=redis://"+redis.Addr())

	var limit atomic.Uint32 // the limit the last answer showed
	var answered, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w == 0 && i%4 == 0 { // some over /json too
					body, _ := protojson.Marshal(&pb.RateLimitRequest{Domain: "hot", Descriptors: []*rlpb.RateLimitDescriptor{desc("k", fmt.Sprint(w))}})
					if code, _, out := p.post(body); code != 200 {
						failed.Add(1)
						t.Errorf("/json during reloads: %d %s", code, out)
					}
					continue
				}
				resp, err := p.ask(context.Background(), "hot", desc("k", fmt.Sprint(w)))
				if err != nil || resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit == nil {
					failed.Add(1)
					t.Errorf("during reloads: %v %v", resp, err)
					continue
				}
				answered.Add(1)
				limit.Store(resp.Statuses[0].CurrentLimit.RequestsPerUnit)
			}
		})
	}
	waitFor(t, "load", func() bool { return answered.Load() > 50 })
	swap("..v2", rules(2_000_000))
	waitFor(t, "the new limit", func() bool { return limit.Load() == 2_000_000 })
	before := answered.Load()
	swap("..v3", "domain: hot\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n")
	waitFor(t, "the broken file rejected", func() bool { return p.metric(`redlimit_config_reloads_total{result="failure"}`) >= 1 })
	waitFor(t, "more answers", func() bool { return answered.Load() > before+50 })
	if got := limit.Load(); got != 2_000_000 {
		t.Fatalf("limit %d after the broken file, want 2000000 still", got)
	}
	// SIGHUP reloads too (the same broken file: one more failure).
	fails := p.metric(`redlimit_config_reloads_total{result="failure"}`)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "SIGHUP reload", func() bool {
		return strings.Contains(p.logs.String(), "SIGHUP") && p.metric(`redlimit_config_reloads_total{result="failure"}`) > fails
	})
	swap("..v4", rules(3_000_000))
	waitFor(t, "the next good file", func() bool { return limit.Load() == 3_000_000 })
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed during the reloads", failed.Load())
	}
	logs := p.logs.String()
	if !strings.Contains(logs, "configuration rejected") || !strings.Contains(logs, "hot.yaml:5") {
		t.Fatalf("the rejection is not logged with its file and line:\n%s", logs)
	}
	t.Logf("%d requests answered during three reloads", answered.Load())
}

// Bad input on the wire: a clear status, never a crash.
func TestBadInputOnTheWire(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "api.yaml")
	writeFile(t, cfg, apiRules)
	p := startProc(t, nil, "--config="+cfg, "--max-message-bytes=262144")
	ctx := context.Background()
	huge := strings.Repeat("x", 100_000)
	for _, tc := range []struct {
		name string
		req  *pb.RateLimitRequest
		code codes.Code
		msg  string
	}{
		{"empty domain", &pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{desc("k", "v")}}, codes.InvalidArgument, "empty domain"},
		{"no descriptors", &pb.RateLimitRequest{Domain: "api"}, codes.InvalidArgument, "no descriptors"},
		{"no entries", &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{{}}}, codes.InvalidArgument, "descriptor 0 has no entries"},
		{"empty key", &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("", "v")}}, codes.InvalidArgument, "empty key"},
		{"huge value", &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", huge)}}, codes.InvalidArgument, "more than 65536 bytes"},
		{"too many descriptors", &pb.RateLimitRequest{Domain: "api", Descriptors: manyDescriptors(65)}, codes.InvalidArgument, "more than 64 descriptors"},
		{"message too large", &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("k", strings.Repeat("y", 300_000))}}, codes.ResourceExhausted, "larger than max"},
	} {
		_, err := p.client.ShouldRateLimit(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s with %q", tc.name, err, tc.code, tc.msg)
		}
	}
	okBody, _ := protojson.Marshal(&pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "1.1.1.1")}})
	for _, tc := range []struct {
		name string
		body string
		code int
		msg  string
	}{
		{"malformed JSON", `{"domain": "api", "descriptors": [`, 400, "malformed"},
		{"invalid UTF-8", "{\"domain\": \"a\xff\"}", 400, "malformed"},
		{"empty domain", `{"descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`, 400, "empty domain"},
		{"empty key", `{"domain":"api","descriptors":[{"entries":[{"key":"","value":"v"}]}]}`, 400, "empty key"},
		{"huge descriptors", `{"domain":"api","descriptors":[{"entries":[{"key":"k","value":"` + huge + `"}]}]}`, 400, "more than 65536 bytes"},
		{"oversized body", `{"domain":"` + strings.Repeat("z", 300_000) + `"}`, 413, "larger than 262144 bytes"},
	} {
		code, ctype, out := p.post([]byte(tc.body))
		var prob struct {
			Status int
			Detail string
		}
		if err := json.Unmarshal([]byte(out), &prob); code != tc.code || ctype != "application/problem+json" || err != nil || prob.Status != tc.code || !strings.Contains(prob.Detail, tc.msg) {
			t.Errorf("/json %s: %d %s %.200s, want %d problem with %q", tc.name, code, ctype, out, tc.code, tc.msg)
		}
	}
	// Still serving.
	if code, _, out := p.post(okBody); code != 200 {
		t.Fatalf("after the bad input: %d %s", code, out)
	}
	if resp, err := p.ask(ctx, "api", desc("remote_address", "1.1.1.1")); err != nil || resp.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("after the bad input: %v %v", resp, err)
	}
	if strings.Contains(p.logs.String(), "panic") {
		t.Fatalf("a panic was logged:\n%s", p.logs.String())
	}
}

func manyDescriptors(n int) []*rlpb.RateLimitDescriptor {
	var ds []*rlpb.RateLimitDescriptor
	for i := range n {
		ds = append(ds, desc("k", fmt.Sprint(i)))
	}
	return ds
}

// SIGTERM under load: the requests in flight are answered, the process
// exits 0, and it leaves the live-node registry.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "api.yaml")
	writeFile(t, cfg, apiRules)
	p := startProc(t, nil, "--config="+cfg, "--redis=redis://"+redis.Addr(), "--log-level=debug")
	var answered, unavailable atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := p.ask(context.Background(), "api", desc("route", fmt.Sprint(w, i)))
				switch status.Code(err) {
				case codes.OK:
					answered.Add(1)
				case codes.Unavailable: // after the listener closed
					unavailable.Add(1)
					return
				default:
					t.Errorf("during shutdown: %v", err)
					return
				}
			}
		})
	}
	waitFor(t, "load", func() bool { return answered.Load() > 100 })
	start := time.Now()
	if err := p.stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
	}
	took := time.Since(start)
	wg.Wait()
	logs := p.logs.String()
	for _, want := range []string{`"msg":"shutting down"`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s in the logs:\n%s", want, logs)
		}
	}
	if members, err := redis.Do("ZRANGE", "redlimit:{nodes}", "0", "-1"); err != nil || members != "" {
		t.Errorf("the live-node registry still lists %q (%v)", members, err)
	}
	t.Logf("%d answered, %d refused once stopping; exit %s after SIGTERM", answered.Load(), unavailable.Load(), took.Round(time.Millisecond))
}

// Start-up failures exit non-zero with the cause; no --config serves with no
// rules and says so; environment variables set flags; the dashboard is on
// unless --dashboard=false (or REDLIMIT_DASHBOARD=false).
func TestStartup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "domain: api\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: -5\n")
	locked := redistest.Start(t, "--requirepass", "right") // a Redis refused stops nothing: TestServeStartsWhileRedisDown
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"broken config", nil, []string{"--config=" + bad}, "bad.yaml:6"},
		{"broken config from the environment", []string{"REDLIMIT_CONFIG=" + bad}, nil, "bad.yaml:6"},
		{"no such config", nil, []string{"--config=" + filepath.Join(dir, "none")}, "no such file"},
		{"Redis wrong password", nil, []string{"--redis=redis://:wrong@" + locked.Addr()}, "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tryStartProc(t, tc.env, tc.args...)
			err := p.wait(20 * time.Second)
			if p.cmd.ProcessState == nil || p.cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("exit %v, want 1", err)
			}
			if logs := p.logs.String(); !strings.Contains(logs, tc.want) || !strings.Contains(logs, "cannot start") {
				t.Fatalf("the logs do not say %q:\n%s", tc.want, logs)
			}
		})
	}
	t.Run("no config", func(t *testing.T) {
		p := startProc(t, []string{"REDLIMIT_SHADOW=true"})
		resp, err := p.ask(context.Background(), "any", desc("k", "v"))
		if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("%v %v", resp, err)
		}
		logs := p.logs.String()
		for _, want := range []string{"every request is allowed", "shared with no other instance", `"shadow":true`} {
			if !strings.Contains(logs, want) {
				t.Errorf("no %q in the logs:\n%s", want, logs)
			}
		}
	})
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int // GET / and GET /api/stats
	}{
		{"dashboard", nil, nil, 200},
		{"dashboard off", nil, []string{"--dashboard=false"}, 404},
		{"dashboard off from the environment", []string{"REDLIMIT_DASHBOARD=false"}, nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, tc.env, tc.args...)
			for _, path := range []string{"/", "/api/stats"} {
				if code, body := p.get(path); code != tc.want {
					t.Errorf("GET %s: %d, want %d\n%s", path, code, tc.want, body)
				}
			}
			if code, _ := p.get("/healthz"); code != 200 {
				t.Errorf("GET /healthz: %d", code)
			}
		})
	}
}
