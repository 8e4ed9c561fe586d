package main

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
)

// The gRPC limits are flags: past --grpc-max-connections a connection is
// closed at once and counted.
func TestServeGRPCLimitFlags(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "api.yaml")
	writeFile(t, cfg, apiRules)
	p := startProc(t, nil, "--config="+cfg, "--grpc-max-connections=2", "--grpc-max-streams=10",
		"--grpc-max-pending-bytes=1048576", "--grpc-max-connection-age=1h")
	if _, err := p.ask(context.Background(), "api", desc("remote_address", "1.1.1.1")); err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	second := dial()
	waitFor(t, "two connections", func() bool { return p.metric("redlimit_grpc_connections") == 2 })
	third := dial()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the third connection read %d bytes, want it closed", n)
	}
	if got := p.metric("redlimit_grpc_connections_refused_total"); got != 1 {
		t.Fatalf("redlimit_grpc_connections_refused_total = %v", got)
	}
	second.Close()
	waitFor(t, "one connection", func() bool { return p.metric("redlimit_grpc_connections") == 1 })
}

// request sends one HTTP request to the process with the given Host and
// header fields, and returns its status.
func (p *proc) request(t *testing.T, method, path, host, body string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.httpAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The HTTP server answers only the allowed hosts (--allowed-hosts, or
// REDLIMIT_ALLOWED_HOSTS), takes /json as curl -d sends it (a form's
// type), and refuses cross-site writes whatever their type: a page
// elsewhere can neither read the dashboard's data by DNS rebinding nor
// spend a visitor's limits.
func TestServeHTTPHostAndOrigin(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "api.yaml")
	writeFile(t, cfg, apiRules)
	body := `{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"9.9.9.9"}]}]}`
	p := startProc(t, []string{"REDLIMIT_ALLOWED_HOSTS=ratelimit.test"}, "--config="+cfg)
	q := startProc(t, nil, "--config="+cfg, "--allowed-hosts=*")
	_, port, _ := net.SplitHostPort(p.httpAddr)
	for _, tc := range []struct {
		p            *proc
		method, path string
		host         string
		header       []string
		want         int
	}{
		{p, "GET", "/api/stats", "rebound.example:" + port, nil, 421},
		{p, "GET", "/rules", "rebound.example:" + port, nil, 421},
		{p, "GET", "/metrics", "rebound.example", nil, 421},
		{p, "GET", "/api/stats", "ratelimit.test:" + port, nil, 200},
		{p, "GET", "/api/stats", "localhost:" + port, nil, 200},
		{q, "GET", "/api/stats", "rebound.example", nil, 200},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example"}, 403},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"}, 403},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "application/x-www-form-urlencoded"}, 200},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, 403},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, 403},
		{p, "POST", "/json", "127.0.0.1:" + port, []string{"Content-Type", "application/json"}, 200},
	} {
		if got := tc.p.request(t, tc.method, tc.path, tc.host, body, tc.header...); got != tc.want {
			t.Errorf("%s %s Host %s %q: %d, want %d", tc.method, tc.path, tc.host, tc.header, got, tc.want)
		}
	}
}

// Finding 14, on the built binary: a Redis URL that does not parse is
// reported without its password; the URL can come from REDLIMIT_REDIS or
// --redis-url-file, off the command line; and --pprof does not serve
// /debug/pprof/cmdline.
func TestServeRedisSecrets(t *testing.T) {
	t.Parallel()
	const secret = "Zq9sekret"
	leaks := func(s string) bool {
		return strings.Contains(s, secret) || strings.Contains(s, "Zq9") || strings.Contains(s, "sekret")
	}
	for _, url := range []string{
		"redis://:s3cr%et" + secret + "@127.0.0.1:1",
		"redis://default:Zq9/sekret@127.0.0.1:1",
		"redis://u:12/" + secret + "@127.0.0.1:1",
		"redis:" + secret + "@127.0.0.1:1",
	} {
		p := tryStartProc(t, nil, "--redis="+url)
		if err := p.wait(20 * time.Second); err == nil {
			t.Fatalf("--redis=%q: exit 0", url)
		}
		if logs := p.logs.String(); leaks(logs) || !strings.Contains(logs, "cannot use Redis") {
			t.Errorf("--redis=%q: the log shows the password, or no reason:\n%s", url, logs)
		}
	}
	redis := redistest.Start(t, "--requirepass", secret)
	url := "redis://:" + secret + "@" + redis.Addr()
	file := filepath.Join(t.TempDir(), "redis-url")
	if err := os.WriteFile(file, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{
		startProc(t, []string{"REDLIMIT_REDIS=" + url}, "--pprof", "--redis-prefix=env:"),
		startProc(t, nil, "--pprof", "--redis-url-file="+file, "--redis-prefix=file:"),
		startProc(t, nil, "--pprof", "--redis="+url, "--redis-prefix=flag:"),
	} {
		if _, err := p.ask(context.Background(), "api", desc("remote_address", "1.1.1.1")); err != nil {
			t.Fatal(err)
		}
		if code, body := p.get("/debug/pprof/cmdline"); code != 404 || leaks(body) {
			t.Errorf("/debug/pprof/cmdline: %d %q", code, body)
		}
		if leaks(p.logs.String()) || !strings.Contains(p.logs.String(), "redis://:xxxxx@") {
			t.Errorf("the log shows the password, or not the redacted URL:\n%s", p.logs.String())
		}
	}
	p := tryStartProc(t, nil, "--redis="+url, "--redis-url-file="+file)
	if err := p.wait(20 * time.Second); err == nil || !strings.Contains(p.logs.String(), "give one") || leaks(p.logs.String()) {
		t.Errorf("--redis and --redis-url-file: %v\n%s", err, p.logs.String())
	}
}

// A cost near the wire's largest never opens a limit (issue 11, finding
// 2: a 1/hour token bucket answered OK to hits_addend 4,000,000,000 and
// was refilled by it). Through the built binary, on memory and on Redis,
// for both ways of sending a cost: the request's hits_addend (an
// admission: denied, consuming nothing) and a descriptor's own (a debit
// under the default counting, auto: counted, so the bucket is in debt and
// the next hit is denied).
func TestServeHugeHitsAddend(t *testing.T) {
	t.Parallel()
	const rules = `domain: hostile
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
`
	cfg := filepath.Join(t.TempDir(), "hostile.yaml")
	writeFile(t, cfg, rules)
	redis := redistest.Shared(t)
	for _, store := range []struct {
		name string
		args []string
	}{
		{"memory", nil},
		{"redis", []string{"--redis=redis://" + redis.Addr(), "--timeout=10s"}},
	} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			p := startProc(t, nil, append([]string{"--config=" + cfg}, store.args...)...)
			ask := func(user string, requestHits, ownHits uint64) pb.RateLimitResponse_Code {
				t.Helper()
				d := desc("user", user)
				if ownHits > 0 {
					d.HitsAddend = wrapperspb.UInt64(ownHits)
				}
				resp, err := p.client.ShouldRateLimit(context.Background(),
					&pb.RateLimitRequest{Domain: "hostile", HitsAddend: uint32(requestHits), Descriptors: []*rlpb.RateLimitDescriptor{d}})
				if err != nil {
					t.Fatal(err)
				}
				return resp.OverallCode
			}
			user := "u-" + strconv.FormatInt(time.Now().UnixNano(), 36) // a key of its own on the shared Redis
			const huge = 4_000_000_000
			for _, step := range []struct {
				what         string
				request, own uint64
				want         pb.RateLimitResponse_Code
			}{
				{"a huge admission on a full bucket", huge, 0, pb.RateLimitResponse_OVER_LIMIT},
				{"a hit after it (nothing consumed)", 0, 0, pb.RateLimitResponse_OK},
				{"a hit on the empty bucket", 0, 0, pb.RateLimitResponse_OVER_LIMIT},
				{"a huge admission on the empty bucket", huge, 0, pb.RateLimitResponse_OVER_LIMIT},
				{"a huge debit on the empty bucket", 0, huge, pb.RateLimitResponse_OVER_LIMIT},
				{"the largest debit", 0, redlimit.MaxCost, pb.RateLimitResponse_OVER_LIMIT},
				{"a hit after the debits (not refilled)", 0, 0, pb.RateLimitResponse_OVER_LIMIT},
			} {
				if got := ask(user, step.request, step.own); got != step.want {
					t.Fatalf("%s: %v, want %v", step.what, got, step.want)
				}
			}
			// Above the largest cost the API counts: refused, counting nothing.
			d := desc("user", user+"-fresh")
			d.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
			_, err := p.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "hostile", Descriptors: []*rlpb.RateLimitDescriptor{d}})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("a debit of 2^64-1: %v, want InvalidArgument", err)
			}
			if got := ask(user+"-fresh", 0, 0); got != pb.RateLimitResponse_OK {
				t.Fatalf("a hit after the refused debit: %v, want OK", got)
			}
		})
	}
}
