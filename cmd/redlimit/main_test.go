package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	addr := fs.String("grpc-addr", "a", "")
	timeout := fs.Duration("timeout", time.Second, "")
	shadow := fs.Bool("shadow", false, "")
	env := map[string]string{"REDLIMIT_GRPC_ADDR": "b", "REDLIMIT_TIMEOUT": "5ms", "REDLIMIT_SHADOW": "true"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := fromEnv(fs, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != "b" || *timeout != 5*time.Millisecond || !*shadow {
		t.Fatalf("from the environment: %q %s %v", *addr, *timeout, *shadow)
	}
	// A flag on the command line wins.
	if err := fs.Parse([]string{"--grpc-addr=c"}); err != nil || *addr != "c" {
		t.Fatalf("flag over env: %q %v", *addr, err)
	}
	env["REDLIMIT_TIMEOUT"] = "soon"
	if err := fromEnv(fs, lookup); err == nil || !strings.Contains(err.Error(), "REDLIMIT_TIMEOUT=\"soon\"") {
		t.Fatalf("a bad value: %v", err)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{nil, 2, "", "Usage:"},
		{[]string{"help"}, 0, "redlimit serve [flags]", ""},
		{[]string{"launch"}, 2, "", `unknown command "launch"`},
		{[]string{"serve", "--help"}, 0, "(env REDLIMIT_RESPONSE_HEADERS)", ""},
		{[]string{"serve", "--nope"}, 2, "", "flag provided but not defined"},
		{[]string{"serve", "--response-headers", "envoy"}, 2, "", `unexpected argument "envoy"`},
		{[]string{"serve", "--response-headers=fancy"}, 2, "", "unknown response headers"},
		{[]string{"serve", "--log-format=xml"}, 2, "", "want text or json"},
		{[]string{"serve", "--log-level=loud"}, 2, "", "log-level"},
		{[]string{"bench", "--help"}, 0, "Usage: redlimit bench", ""},
		{[]string{"bench", "--target=nowhere"}, 2, "", "nowhere"},
		{[]string{"bench", "--target=memory", "--duration=300ms", "--concurrency=4", "--limit=50"}, 0, "allowed ", ""},
		{[]string{"simulate", "--help"}, 0, "Usage: redlimit simulate", ""},
		{[]string{"simulate", "--pattern=straddle", "--limit=100", "--period=1m"}, 0, "fixed_window", ""},
		{[]string{"simulate", "--pattern=zigzag"}, 2, "", "zigzag"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("%q: %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out, tc.err)
		}
	}
	// Every flag is documented with its environment variable.
	var out bytes.Buffer
	run([]string{"serve", "--help"}, &out, &out)
	for _, f := range []string{"config", "redis", "grpc-addr", "http-addr", "shadow", "response-headers", "log-format", "log-level", "timeout", "max-descriptors", "max-entries", "max-descriptor-bytes", "max-message-bytes", "dashboard"} {
		if !strings.Contains(out.String(), "--"+f+" ") && !strings.Contains(out.String(), "--"+f+"   ") {
			t.Errorf("--help does not list --%s", f)
		}
		if !strings.Contains(out.String(), envName(f)) {
			t.Errorf("--help does not name %s", envName(f))
		}
	}
}
