package loadgen_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/service/internal/loadgen"
)

func TestMainBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string // in the message
	}{
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--target", "kafka"}, `--target "kafka": want memory, redis, grpc or json`},
		{[]string{"--concurrency", "0"}, "--concurrency 0 is not in 1..4096"},
		{[]string{"--concurrency", "x"}, `invalid value "x" for flag -concurrency`},
		{[]string{"--duration", "-1s"}, "--duration -1s is not positive"},
		{[]string{"--duration", "10"}, `invalid value "10" for flag -duration`},
		{[]string{"--keys", "0"}, "--keys 0 is not in 1..10000000"},
		{[]string{"--dist", "normal"}, `unknown key distribution "normal"`},
		{[]string{"--dist", "zipf", "--zipf-s", "1"}, "--zipf-s 1 is not above 1"},
		{[]string{"--zipf-s", "2"}, "--zipf-s applies to --dist zipf only"},
		{[]string{"--cost", "0"}, "--cost 0 is not in 1.."},
		{[]string{"--algorithm", "leaky_bucket"}, `unknown algorithm: "leaky_bucket"`},
		{[]string{"--limit", "0"}, "invalid limit: count 0"},
		{[]string{"--period", "0s"}, "invalid limit: period 0s"},
		{[]string{"--algorithm", "sliding_log", "--limit", "1000000"}, "a sliding log keeps one entry per request"},
		{[]string{"--burst", "5"}, "--burst applies to token_bucket only, not to sliding_window"},
		{[]string{"--algorithm", "token_bucket", "--burst", "0"}, "invalid burst: burst 0"},
		{[]string{"--addr", "127.0.0.1:1"}, "--addr applies to the grpc and json target, not to memory"},
		{[]string{"--target", "memory", "--redis", "redis://x"}, "--redis applies to the redis target, not to memory"},
		{[]string{"--target", "grpc", "--algorithm", "token_bucket"}, "--algorithm applies to the memory and redis target, not to grpc"},
		{[]string{"--target", "json", "--limit", "5"}, "--limit applies to the memory and redis target, not to json"},
		{[]string{"--target", "grpc", "--cost", "4294967296"}, "the most hits_addend holds"},
		{[]string{"--target", "grpc", "--domain", ""}, "--domain is empty"},
		{[]string{"--target", "json", "--descriptor-key", ""}, "--descriptor-key is empty"},
	} {
		var stdout, stderr strings.Builder
		code := loadgen.Main(tc.args, &stdout, &stderr)
		msg := stderr.String()
		if code != loadgen.ExitUsage || !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "redlimit bench: ") ||
			!strings.Contains(msg, "redlimit bench -help") || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, msg, stdout.String(), tc.want)
		}
	}
}

func TestMainHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr strings.Builder
		if code := loadgen.Main([]string{arg}, &stdout, &stderr); code != loadgen.ExitOK || stderr.Len() != 0 {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, stderr.String())
		}
		help := stdout.String()
		for _, flag := range []string{
			"target", "redis", "addr", "domain", "descriptor-key", "algorithm", "limit", "period", "burst",
			"concurrency", "duration", "keys", "dist", "zipf-s", "cost", "key-prefix", "seed", "json", "quiet",
		} {
			if !strings.Contains(help, "\n  -"+flag+" ") && !strings.Contains(help, "\n  -"+flag+"\n") {
				t.Errorf("%s: the help does not document -%s", arg, flag)
			}
		}
		if !strings.HasPrefix(help, "Usage: redlimit bench [flags]") {
			t.Errorf("help starts %q", help[:40])
		}
	}
}

func TestMainMemory(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr strings.Builder
	code := loadgen.Main([]string{
		"--algorithm", "token_bucket", "--limit", "100", "--period", "100ms", "--concurrency", "8", "--duration", "300ms",
		"--keys", "10", "--dist", "zipf", "--zipf-s", "1.5", "--cost", "2", "--seed", "42", "--json", out,
	}, &stdout, &stderr)
	if code != loadgen.ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	checkPlausible(t, &res)
	if res.Target != "memory" || res.Limit != "100/100ms token_bucket burst 100" || res.Concurrency != 8 || res.Keys != 10 ||
		res.Distribution != loadgen.Zipf || res.ZipfS != 1.5 || res.Cost != 2 || res.Seed != 42 {
		t.Errorf("the result does not have the flags' values: %s", b)
	}
	if res.Allowed == 0 || res.Decisions >= 10_000 && res.Denied == 0 {
		t.Errorf("allowed %d, denied %d", res.Allowed, res.Denied)
	}
	for _, want := range []string{"target       memory", "decisions ", "latency      p50 "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary without %q:\n%s", want, stdout.String())
		}
	}
}

func TestMainJSONToStdout(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	code := loadgen.Main([]string{"--duration", "50ms", "--concurrency", "2", "--quiet", "--json", "-"}, &stdout, &stderr)
	if code != loadgen.ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	var res loadgen.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout.String())
	}
	checkPlausible(t, &res)
	// The summary goes to stderr instead.
	if !strings.Contains(stderr.String(), "target       memory") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestMainServices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target string
		addr   func(url string) string // of the server's address (grpc) or URL (json)
	}{
		{"grpc", func(addr string) string { return addr }},
		{"json", func(url string) string { return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/json") }}, // host:port becomes http://host:port/json
		{"json", func(url string) string { return url }},
	} {
		t.Run(tc.target, func(t *testing.T) {
			t.Parallel()
			rls := newCountingRLS("api", "user", 10)
			var served, want string
			if tc.target == "grpc" {
				served = serveGRPC(t, rls)
				want = "grpc " + served
			} else {
				served = serveJSON(t, rls)
				want = "json " + served
			}
			out := filepath.Join(t.TempDir(), "out.json")
			var stdout, stderr strings.Builder
			code := loadgen.Main([]string{
				"--target", tc.target, "--addr", tc.addr(served), "--domain", "api", "--descriptor-key", "user",
				"--concurrency", "8", "--duration", "300ms", "--keys", "3", "--cost", "2", "--quiet", "--json", out,
			}, &stdout, &stderr)
			if code != loadgen.ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var res loadgen.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			// The preflight took its decision on a key of its own.
			checkCounted(t, &res, rls)
			if res.Target != want {
				t.Errorf("target %q, want %q", res.Target, want)
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr with --quiet:\n%s", stderr.String())
			}
		})
	}
}

func TestMainUnreachable(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	for _, args := range [][]string{
		{"--target", "grpc", "--addr", addr},
		{"--target", "json", "--addr", addr},
		{"--target", "redis", "--redis", "redis://" + addr},
	} {
		var stdout, stderr strings.Builder
		code := loadgen.Main(append(args, "--duration", "1s"), &stdout, &stderr)
		if code != loadgen.ExitFailure || !strings.HasPrefix(stderr.String(), "redlimit bench: ") || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 1 and a message", args, code, stderr.String(), stdout.String())
		}
		t.Logf("%s: %s", args[1], strings.TrimSpace(stderr.String()))
	}
}
