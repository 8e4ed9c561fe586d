package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// envoyBase is envoyproxy/ratelimit's environment for a test: loopback
// listeners on free ports, JSON logs at info (startProc reads "serving").
var envoyBase = []string{"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "LOG_FORMAT=json", "LOG_LEVEL=info"}

// startEnvoyEnv runs `redlimit serve`, no flags, with envoyBase and env.
func startEnvoyEnv(t *testing.T, env ...string) *proc {
	t.Helper()
	p := tryStartCommand(t, binPath, append(envoyBase[:len(envoyBase):len(envoyBase)], env...), "serve")
	select {
	case <-p.exited:
		t.Fatalf("redlimit exited at start (%v):\n%s", p.exitErr, p.logs.String())
	default:
	}
	return p
}

// runtimeTree lays out rule files as envoyproxy/ratelimit's deployments
// do: RUNTIME_ROOT a symbolic link to a tree holding
// RUNTIME_SUBDIRECTORY/config/*.yaml, swapped atomically to a new tree.
type runtimeTree struct {
	t    *testing.T
	dir  string
	root string // the link, RUNTIME_ROOT
	n    int
}

func newRuntimeTree(t *testing.T, files map[string]string) *runtimeTree {
	r := &runtimeTree{t: t, dir: t.TempDir()}
	r.root = filepath.Join(r.dir, "current")
	r.swap(files)
	return r
}

// swap writes files to a new tree and points the link at it.
func (r *runtimeTree) swap(files map[string]string) {
	r.t.Helper()
	r.n++
	tree := filepath.Join(r.dir, "tree"+strings.Repeat("x", r.n))
	for name, body := range files {
		writeDeep(r.t, filepath.Join(tree, "ratelimit", "config", name), body)
	}
	tmp := filepath.Join(r.dir, "current.tmp")
	if err := os.Symlink(tree, tmp); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.root); err != nil {
		r.t.Fatal(err)
	}
}

// writeDeep is writeFile, making the directories it needs.
func writeDeep(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
}

func (r *runtimeTree) env() []string {
	return []string{"RUNTIME_ROOT=" + r.root, "RUNTIME_SUBDIRECTORY=ratelimit"}
}

// TestEnvoyEnvServes: started with envoyproxy/ratelimit's environment
// only, serve passes the checks TestServeGRPCAndJSON makes of it started
// with redlimit's flags: the RUNTIME_* layout, Redis at REDIS_URL, and
// its response headers, renamed to the X-RateLimit-* names.
func TestEnvoyEnvServes(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	rt := newRuntimeTree(t, map[string]string{"api.yaml": apiRules})
	p := startEnvoyEnv(t, append(rt.env(),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr(), "REDIS_TIMEOUT=5s",
		"LIMIT_RESPONSE_HEADERS_ENABLED=true", "LIMIT_LIMIT_HEADER=X-RateLimit-Limit",
		"LIMIT_REMAINING_HEADER=X-RateLimit-Remaining", "LIMIT_RESET_HEADER=X-RateLimit-Reset")...)
	checkServeGRPCAndJSON(t, p)
	// envoyproxy/ratelimit's health path.
	if code, _ := p.get("/healthcheck"); code != 200 {
		t.Errorf("/healthcheck: %d", code)
	}
}

// TestEnvoyEnvAsRatelimit: the binary invoked as ratelimit, with no
// arguments, serves; envoyproxy/ratelimit's defaults fill what is unset
// (here the rule directory's name, config, under RUNTIME_ROOT).
func TestEnvoyEnvAsRatelimit(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	link := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(binPath, link); err != nil {
		t.Fatal(err)
	}
	rt := newRuntimeTree(t, map[string]string{"api.yaml": apiRules})
	env := append(envoyBase[:len(envoyBase):len(envoyBase)], "RUNTIME_ROOT="+rt.root+"/ratelimit", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr())
	p := tryStartCommand(t, link, env)
	select {
	case <-p.exited:
		t.Fatalf("ratelimit exited at start (%v):\n%s", p.exitErr, p.logs.String())
	default:
	}
	resp, err := p.ask(context.Background(), "api", desc("remote_address", "1.2.3.4"))
	if err != nil || resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("%v %v", resp, err)
	}
	// Its defaults: no deny cache (LOCAL_CACHE_SIZE_IN_BYTES=0), Redis at
	// REDIS_URL.
	if !strings.Contains(p.logs.String(), "limits kept in Redis") {
		t.Errorf("not on Redis:\n%s", p.logs.String())
	}
}

// TestEnvoyEnvRedisAuth: REDIS_AUTH as a password (requirepass) and as
// user:password (an ACL user) reaches a Redis that requires it; a wrong
// one stops start-up.
func TestEnvoyEnvRedisAuth(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, "--requirepass", "s3cret")
	if _, err := redis.Do("ACL", "SETUSER", "rl", "on", ">p@ss:w0rd", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	rt := newRuntimeTree(t, map[string]string{"api.yaml": apiRules})
	base := append(rt.env(), "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr(), "REDIS_TIMEOUT=5s")
	for _, auth := range []string{"s3cret", "rl:p@ss:w0rd"} {
		t.Run(auth, func(t *testing.T) {
			p := startEnvoyEnv(t, append(base, "REDIS_AUTH="+auth, "CACHE_KEY_PREFIX=auth-"+auth[:2]+":")...)
			for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
				resp, err := p.ask(context.Background(), "api", desc("remote_address", "7.7.7.7"))
				if err != nil || resp.OverallCode != want {
					t.Fatalf("request %d: %v %v; want %v", i, resp, err, want)
				}
			}
			if logs := p.logs.String(); strings.Contains(logs, "s3cret") || strings.Contains(logs, "w0rd") {
				t.Errorf("a password in the logs:\n%s", logs)
			}
		})
	}
	keys, err := redis.Do("KEYS", "auth-*")
	if err != nil || !strings.Contains(keys, "auth-s3:") || !strings.Contains(keys, "auth-rl:") {
		t.Errorf("CACHE_KEY_PREFIX: keys %q %v", keys, err)
	}
	p := tryStartCommand(t, binPath, append(envoyBase[:len(envoyBase):len(envoyBase)], append(base, "REDIS_AUTH=wrong")...), "serve")
	if err := p.wait(20 * time.Second); p.cmd.ProcessState == nil || p.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("a wrong REDIS_AUTH: exit %v\n%s", err, p.logs.String())
	}
}

// TestEnvoyEnvRuntimeSwap: a RUNTIME_ROOT link swapped to a new tree, as
// envoyproxy/ratelimit's deployments release rules, is reloaded.
func TestEnvoyEnvRuntimeSwap(t *testing.T) {
	t.Parallel()
	rule := func(n string) string {
		return "domain: swap\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + n + "}\n"
	}
	rt := newRuntimeTree(t, map[string]string{"swap.yaml": rule("5")})
	p := startEnvoyEnv(t, rt.env()...)
	limit := func() uint32 {
		resp, err := p.ask(context.Background(), "swap", desc("k", "v"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	if got := limit(); got != 5 {
		t.Fatalf("limit %d, want 5", got)
	}
	rt.swap(map[string]string{"swap.yaml": rule("7"), "other.yaml": "domain: other\ndescriptors: []\n"})
	waitFor(t, "the swapped tree's rules", func() bool { return limit() == 7 })
	rt.swap(map[string]string{"swap.yaml": rule("9")})
	waitFor(t, "the second swap's rules", func() bool { return limit() == 9 })
}

// TestEnvoyEnvBehaviour: SHADOW_MODE answers OK over the limit, and
// LOG_FORMAT=json makes every log line JSON; a setting with no meaning
// here is named once, with what redlimit does instead.
func TestEnvoyEnvBehaviour(t *testing.T) {
	t.Parallel()
	rt := newRuntimeTree(t, map[string]string{"api.yaml": apiRules})
	p := startEnvoyEnv(t, append(rt.env(), "SHADOW_MODE=true", "REDIS_POOL_SIZE=10", "EXPIRATION_JITTER_MAX_SECONDS=300")...)
	for i := range 5 {
		resp, err := p.ask(context.Background(), "api", desc("remote_address", "1.2.3.4"))
		if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("request %d in shadow mode: %v %v", i, resp, err)
		}
	}
	if got := p.metric(`redlimit_rls_decisions_total{domain="api",outcome="shadow_denied",rule="api.remote_address"}`); got != 2 {
		t.Errorf("shadow denials counted: %v, want 2", got)
	}
	p.stop()
	named := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(p.logs.String()), "\n") {
		var rec struct{ Msg, Setting, Instead string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if rec.Msg == "envoyproxy/ratelimit setting not used" && rec.Instead != "" {
			named[rec.Setting]++
		}
	}
	if named["REDIS_POOL_SIZE"] != 1 || named["EXPIRATION_JITTER_MAX_SECONDS"] != 1 || len(named) != 2 {
		t.Errorf("settings named as unused: %v", named)
	}
}

// TestEnvoyEnvRefused: a setting whose value cannot work stops start-up
// with an error naming it, never an in-memory store.
func TestEnvoyEnvRefused(t *testing.T) {
	t.Parallel()
	locked := redistest.Start(t, "--requirepass", "right")
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"BACKEND_TYPE=memcache", "MEMCACHE_HOST_PORT=127.0.0.1:11211"}, "BACKEND_TYPE"},
		{[]string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=redis.local"}, "REDIS_URL"},
		{[]string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=[::1:6379"}, "REDIS_URL"},
		{[]string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + locked.Addr()}, "NOAUTH"},
		{[]string{"GRPC_SERVER_USE_TLS=true"}, "GRPC_SERVER_TLS_CERT"},
	} {
		p := tryStartCommand(t, binPath, append(envoyBase[:len(envoyBase):len(envoyBase)], tc.env...), "serve")
		err := p.wait(20 * time.Second)
		if p.cmd.ProcessState == nil || p.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(p.logs.String(), tc.want) {
			t.Errorf("%v: exit %v; want an error naming %q:\n%s", tc.env, err, tc.want, p.logs.String())
		}
	}
}

// TestEnvoyEnvTLSSAN: GRPC_SERVER_USE_TLS with a client CA and
// GRPC_CLIENT_TLS_SAN serves the clients whose certificate names the SAN,
// and refuses one the CA signed for another name; HTTP stays plain, as
// envoyproxy/ratelimit's.
func TestEnvoyEnvTLSSAN(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "redlimit").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	cfgFile := filepath.Join(dir, "rules", "config", "tls.yaml")
	writeDeep(t, cfgFile, tlsRules)
	p := startEnvoyEnv(t, "RUNTIME_ROOT="+filepath.Join(dir, "rules"), "GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT="+cert, "GRPC_SERVER_TLS_KEY="+key,
		"GRPC_CLIENT_TLS_CACERT="+caFile, "GRPC_CLIENT_TLS_SAN=envoy.gateway")
	client := func(names ...string) *tls.Config {
		return tlstest.ClientConfig(ca, ca.Issue(t, tlstest.Template{CommonName: "c", DNSNames: names, Client: true}))
	}
	if _, err := tlsAsk(p.grpcAddr, client("envoy.gateway")); err != nil {
		t.Fatalf("the listed SAN: %v", err)
	}
	if _, err := tlsAsk(p.grpcAddr, client("intruder")); err == nil {
		t.Fatal("a SAN not listed was served")
	}
	if code, _ := p.get("/healthz"); code != 200 {
		t.Errorf("plain HTTP /healthz: %d", code)
	}
}

// TestCompatEnvoy: REDLIMIT_COMPAT=envoy gives the numbers of
// docs/MIGRATING.md's side-by-side table: rules that name no algorithm
// count fixed windows, and a denied request consumes from its other
// descriptors too; without it, sliding windows, and nothing consumed.
func TestCompatEnvoy(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	rules := "domain: c\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 10}\n" +
		"  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
	for _, tc := range []struct {
		env       []string
		algorithm string
		remaining uint32 // of a, after one request of a and b, one denied by b, and one of a
	}{
		{nil, "sliding_window", 8},
		{[]string{"REDLIMIT_COMPAT=envoy"}, "fixed_window", 7},
	} {
		t.Run(tc.algorithm, func(t *testing.T) {
			rt := newRuntimeTree(t, map[string]string{"c.yaml": rules})
			p := startEnvoyEnv(t, append(append(rt.env(), "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr(), "REDIS_TIMEOUT=5s",
				"CACHE_KEY_PREFIX="+tc.algorithm+":"), tc.env...)...)
			_, body := p.get("/rules")
			if n := strings.Count(body, `"algorithm": "`+tc.algorithm+`"`); n != 2 {
				t.Errorf("/rules: %d rules of %s, want 2:\n%s", n, tc.algorithm, body)
			}
			// Keep the three requests in one minute (fixed windows align
			// to the epoch, and Redis runs on this clock): a new window
			// would admit the second.
			if s := time.Now().Unix() % 60; s >= 55 {
				time.Sleep(time.Duration(60-s)*time.Second + 100*time.Millisecond)
			}
			ctx := context.Background()
			if resp, err := p.ask(ctx, "c", desc("a", "x"), desc("b", "x")); err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
				t.Fatalf("first: %v %v", resp, err)
			}
			if resp, err := p.ask(ctx, "c", desc("a", "x"), desc("b", "x")); err != nil || resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("second: %v %v", resp, err)
			}
			resp, err := p.ask(ctx, "c", desc("a", "x"))
			if err != nil || resp.Statuses[0].LimitRemaining != tc.remaining {
				t.Fatalf("a after the denial: %v %v; want %d remaining", resp, err, tc.remaining)
			}
		})
	}
}
