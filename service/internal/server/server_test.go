package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/ratelimitfield"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// ruleFile is a small envoyproxy/ratelimit-style configuration. Its fixed
// window is an hour long, so that a test seldom crosses a window's end.
const ruleFile = `domain: web
descriptors:
  - key: ip
    rate_limit:
      name: per_ip
      unit: hour
      requests_per_unit: %d
      algorithm: fixed_window
  - key: path
    value: /health
    rate_limit:
      unlimited: true
`

// running is a Server run by a test.
type running struct {
	*Server
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	conn   *grpc.ClientConn
	client pb.RateLimitServiceClient
}

// start makes and runs a Server on free loopback ports; it is shut down at
// the end of the test.
func start(t *testing.T, o Options) *running {
	t.Helper()
	r := startNotReady(t, o)
	waitFor(t, "ready", func() bool { return r.get(t, "/readyz") == 200 })
	return r
}

// startNotReady starts a server as start does, without waiting for it to
// be ready.
func startNotReady(t *testing.T, o Options) *running {
	t.Helper()
	logs := &syncBuffer{}
	o.GRPCAddr, o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.ReloadDebounce == 0 {
		o.ReloadDebounce = 20 * time.Millisecond
	}
	srv, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Server: srv, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(ctx) }()
	r.conn, err = grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.client = pb.NewRateLimitServiceClient(r.conn)
	t.Cleanup(func() {
		r.conn.Close()
		r.stop(t)
	})
	return r
}

func (r *running) stop(t *testing.T) {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		r.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after the shutdown")
	}
}

func (r *running) get(t *testing.T, path string) int {
	t.Helper()
	code, _ := r.getBody(t, path)
	return code
}

func (r *running) getBody(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hits asks the service about one descriptor of domain web, of its own
// hits_addend unless hits is 0.
func (r *running) hits(t *testing.T, hits uint64, kv ...string) *pb.RateLimitResponse {
	t.Helper()
	d := &rlpb.RateLimitDescriptor{}
	if hits > 0 {
		d.HitsAddend = wrapperspb.UInt64(hits)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	resp, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// decide asks the service about one descriptor of domain web.
func (r *running) decide(t *testing.T, kv ...string) *pb.RateLimitResponse {
	t.Helper()
	return r.hits(t, 0, kv...)
}

// metric returns the value of the series that starts with prefix, or -1.
func (r *running) metric(t *testing.T, prefix string) float64 {
	t.Helper()
	_, body := r.getBody(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, prefix+" "), &v)
			return v
		}
	}
	return -1
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 2))
	r := start(t, Options{ConfigPath: path, Headers: ratelimitfield.Draft})

	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if got := r.decide(t, "ip", "1.1.1.1").OverallCode; got != want {
			t.Fatalf("request %d: %s, want %s", i, got, want)
		}
	}
	if code, body := r.getBody(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := r.getBody(t, "/healthcheck"); code != 200 || body != "ready\n" {
		t.Fatalf("/healthcheck: %d %q", code, body)
	}
	code, body := r.getBody(t, "/rules")
	var rules struct {
		Files   []string
		Domains []string
		Rules   []map[string]any
	}
	if err := json.Unmarshal([]byte(body), &rules); code != 200 || err != nil || len(rules.Rules) != 2 || rules.Domains[0] != "web" {
		t.Fatalf("/rules: %d %v %s", code, err, body)
	}
	if rules.Rules[0]["path"] != "web.ip" || rules.Rules[0]["algorithm"] != "fixed_window" || rules.Rules[1]["unlimited"] != true {
		t.Fatalf("/rules: %s", body)
	}
	for series, want := range map[string]float64{
		`redlimit_rls_decisions_total{domain="web",outcome="allowed",rule="web.ip"}`: 2,
		`redlimit_rls_decisions_total{domain="web",outcome="denied",rule="web.ip"}`:  1,
		`redlimit_rls_decisions_by_source_total{source="store"}`:                     3,
		`redlimit_rls_requests_total{answer="over_limit"}`:                           1,
		`redlimit_config_reloads_total{result="success"}`:                            1,
		`redlimit_config_rules`:                   2,
		`redlimit_backend_duration_seconds_count`: 3,
		`redlimit_memory_states`:                  1,
		`redlimit_memory_refused_total`:           0,
	} {
		if got := r.metric(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// No breaker on the memory store.
	if got := r.metric(t, `redlimit_breaker_state{state="closed"}`); got != -1 {
		t.Errorf("breaker state on memory: %v", got)
	}

	// /json on the same service.
	resp, err := http.Post("http://"+r.HTTPAddr()+"/json", "application/json",
		strings.NewReader(`{"domain":"web","descriptors":[{"entries":[{"key":"ip","value":"1.1.1.1"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(b), `"OVER_LIMIT"`) || !strings.Contains(string(b), `RateLimit-Policy`) {
		t.Fatalf("/json: %d %s", resp.StatusCode, b)
	}

	// gRPC health and reflection.
	hc, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	var names []string
	for _, s := range rr.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Fatalf("reflection lists %v", names)
	}
	if !strings.Contains(r.logs.String(), "shared with no other instance") {
		t.Fatalf("no start-up line about the memory store in\n%s", r.logs)
	}
}

func TestNoConfigPath(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	for range 5 {
		if resp := r.decide(t, "ip", "1"); resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("no rules: %v", resp)
		}
	}
	if !strings.Contains(r.logs.String(), "every request is allowed") {
		t.Fatalf("no warning about the missing configuration in\n%s", r.logs)
	}
}

func TestStartupErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "domain: web\ndescriptors:\n  - key: ip\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n")
	busy, err := New(context.Background(), Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"broken config", Options{ConfigPath: bad}, "bad.yaml:5"},
		{"missing config", Options{ConfigPath: filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"redis ca_file without TLS", Options{RedisURL: "redis://127.0.0.1:1?ca_file=x.pem"}, "ca_file"},
		{"bad redis URL", Options{RedisURL: "mysql://x"}, "redis"},
		{"port in use", Options{GRPCAddr: busy.GRPCAddr()}, "address already in use"},
		{"bad cap", Options{MaxDescriptors: 65}, "MaxDescriptors"},
		{"allowed host a URL", Options{AllowedHosts: []string{"http://ratelimit.internal"}}, "AllowedHosts"},
		{"allowed host bad port", Options{AllowedHosts: []string{"ratelimit.internal:http"}}, "AllowedHosts"},
		{"held bytes cap below a message", Options{GRPCMaxPendingBytes: 100 << 10}, "GRPCMaxPendingBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Logger = slog.New(slog.DiscardHandler)
			if o.GRPCAddr == "" {
				o.GRPCAddr = "127.0.0.1:0"
			}
			o.HTTPAddr = "127.0.0.1:0"
			srv, err := New(context.Background(), o)
			if err == nil {
				srv.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// The watcher reloads a file written in place, renamed over, and swapped
// behind a symbolic link as a Kubernetes ConfigMap volume does; a broken
// file is rejected, counted, and the previous configuration keeps serving.
func TestHotReload(t *testing.T) {
	t.Parallel()
	for _, asDir := range []bool{true, false} {
		t.Run(fmt.Sprintf("dir=%v", asDir), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// The ConfigMap layout: rules.yaml -> ..data/rules.yaml, ..data -> ..v1.
			mustMkdir(t, filepath.Join(dir, "..v1"))
			writeFile(t, filepath.Join(dir, "..v1", "rules.yaml"), fmt.Sprintf(ruleFile, 1))
			mustSymlink(t, "..v1", filepath.Join(dir, "..data"))
			mustSymlink(t, filepath.Join("..data", "rules.yaml"), filepath.Join(dir, "rules.yaml"))
			path := dir
			if !asDir {
				path = filepath.Join(dir, "rules.yaml")
			}
			r := start(t, Options{ConfigPath: path})
			limit := func() uint32 {
				return r.decide(t, "ip", fmt.Sprint(time.Now().UnixNano())).Statuses[0].CurrentLimit.GetRequestsPerUnit()
			}
			if got := limit(); got != 1 {
				t.Fatalf("limit %d at start", got)
			}
			// swap writes version/rules.yaml and points ..data at it, atomically.
			swap := func(version, data string) {
				t.Helper()
				d := filepath.Join(dir, version)
				mustMkdir(t, d)
				writeFile(t, filepath.Join(d, "rules.yaml"), data)
				mustSymlink(t, version, filepath.Join(dir, "..data_tmp"))
				if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
			}
			swap("..v2", fmt.Sprintf(ruleFile, 2))
			waitFor(t, "limit 2 after a swap", func() bool { return limit() == 2 })
			fails := r.metric(t, `redlimit_config_reloads_total{result="failure"}`)
			// A broken file: rejected, the old configuration serves on.
			swap("..v3", "domain: web\ndescriptors: [\n")
			waitFor(t, "the failure counted", func() bool {
				return r.metric(t, `redlimit_config_reloads_total{result="failure"}`) > fails
			})
			if got := limit(); got != 2 {
				t.Fatalf("limit %d after a broken file, want the previous 2", got)
			}
			if !strings.Contains(r.logs.String(), "configuration rejected") {
				t.Fatalf("no log of the rejection in\n%s", r.logs)
			}
			swap("..v4", fmt.Sprintf(ruleFile, 4))
			waitFor(t, "limit 4 after a swap", func() bool { return limit() == 4 })
			ok := r.metric(t, `redlimit_config_reloads_total{result="success"}`)
			if err := r.Reload(); err != nil { // as SIGHUP does
				t.Fatal(err)
			}
			// (At least: the watcher may reload once more, late, for the swap.)
			if got := r.metric(t, `redlimit_config_reloads_total{result="success"}`); got < ok+1 {
				t.Fatalf("reloads %v after Reload, want at least %v", got, ok+1)
			}
		})
	}
}

// A file written in place and a file renamed over the old one, in a plain
// directory.
func TestHotReloadPlainFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1))
	r := start(t, Options{ConfigPath: path})
	limit := func() uint32 {
		return r.decide(t, "ip", fmt.Sprint(time.Now().UnixNano())).Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	writeFile(t, path, fmt.Sprintf(ruleFile, 5))
	waitFor(t, "the file written in place", func() bool { return limit() == 5 })
	tmp := filepath.Join(dir, ".rules.yaml.tmp")
	writeFile(t, tmp, fmt.Sprintf(ruleFile, 6))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file renamed over", func() bool { return limit() == 6 })
	writeFile(t, filepath.Join(dir, "notes.txt"), "unrelated") // a reload of the same rules, harmless
	time.Sleep(50 * time.Millisecond)
	if got := limit(); got != 6 {
		t.Fatalf("limit %d", got)
	}
}

func mustMkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// Readiness follows Redis: the service is not ready while Redis does not
// answer, and is again once it does.
func TestReadinessFollowsRedis(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 100))
	r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), Timeout: 20 * time.Millisecond})
	if got := r.metric(t, `redlimit_breaker_state{state="closed"}`); got != 1 {
		t.Fatalf("breaker closed = %v", got)
	}
	if got := r.metric(t, `redlimit_refund_failures_total`); got != 0 {
		t.Fatalf("refund failures on a fresh service = %v, want 0", got)
	}
	health := healthpb.NewHealthClient(r.conn)
	status := func() healthpb.HealthCheckResponse_ServingStatus {
		hc, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return hc.Status
	}
	waitFor(t, "gRPC SERVING", func() bool { return status() == healthpb.HealthCheckResponse_SERVING })
	if err := redis.Pause(); err != nil {
		t.Fatal(err)
	}
	defer redis.Resume()
	waitFor(t, "/readyz 503", func() bool { return r.get(t, "/readyz") == 503 })
	waitFor(t, "gRPC NOT_SERVING", func() bool { return status() == healthpb.HealthCheckResponse_NOT_SERVING })
	// Meanwhile the failure policy (local) answers, and says so.
	for range 3 {
		if resp := r.decide(t, "ip", "x"); resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("with Redis paused: %v", resp)
		}
	}
	if got := r.metric(t, `redlimit_backend_errors_total{reason="local"}`); got < 1 {
		t.Fatalf("backend errors (local) = %v", got)
	}
	if err := redis.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz 200", func() bool { return r.get(t, "/readyz") == 200 })
	waitFor(t, "gRPC SERVING again", func() bool { return status() == healthpb.HealthCheckResponse_SERVING })
}

// Shutdown lets requests in flight finish and closes everything.
func TestShutdown(t *testing.T) {
	t.Parallel()
	redis := redistest.Shared(t)
	srv, err := New(context.Background(), Options{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		RedisURL: "redis://" + redis.Addr(), RedisPrefix: fmt.Sprintf("shut%d:", time.Now().UnixNano()),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	req := &pb.RateLimitRequest{Domain: "x", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k"}}}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var okAfter, failed int
	stopLoad := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				_, err := client.ShouldRateLimit(context.Background(), req)
				mu.Lock()
				if err == nil {
					okAfter++
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil {
					return // the server has gone: Unavailable from the client
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
	close(stopLoad)
	wg.Wait()
	if okAfter == 0 {
		t.Fatal("no request answered")
	}
	if _, err := http.Get("http://" + srv.HTTPAddr() + "/healthz"); err == nil {
		t.Fatal("HTTP still answers after Run returned")
	}
}

// A server that has run and shut down leaves no goroutine behind. (Not
// parallel: it counts the goroutines of the whole test binary.)
func TestNoGoroutineLeak(t *testing.T) {
	redis := redistest.Shared(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 100))
	before := runtime.NumGoroutine()
	func() {
		r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), RedisPrefix: fmt.Sprintf("leak%d:", time.Now().UnixNano())})
		r.decide(t, "ip", "1")
		r.get(t, "/metrics")
		writeFile(t, path, fmt.Sprintf(ruleFile, 50))
		waitFor(t, "reload", func() bool { return r.decide(t, "ip", "2").Statuses[0].CurrentLimit.GetRequestsPerUnit() == 50 })
		r.conn.Close()
		r.stop(t)
		http.DefaultClient.CloseIdleConnections()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
