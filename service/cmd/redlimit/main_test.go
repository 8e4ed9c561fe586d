package main

import (
	"bytes"
	"strings"
	"testing"
)

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
		{[]string{"version"}, 0, "redlimit ", ""},
		{[]string{"--version"}, 0, " (commit ", ""},
		{[]string{"serve", "--help"}, 0, "(env REDLIMIT_RESPONSE_HEADERS)", ""},
		{[]string{"serve", "--nope"}, 2, "", "flag provided but not defined"},
		{[]string{"serve", "--response-headers", "envoy"}, 2, "", `unexpected argument "envoy"`},
		{[]string{"serve", "--response-headers=fancy"}, 2, "", "unknown response headers"},
		{[]string{"serve", "--log-format=xml"}, 2, "", "want text or json"},
		{[]string{"serve", "--log-level=loud"}, 2, "", "log-level"},
		{[]string{"serve", "--http-tls=strict"}, 2, "", "want on, off or mtls"},
		{[]string{"serve", "--unix-socket-mode=rw"}, 2, "", "permission bits in octal"},
		{[]string{"serve", "--unix-socket-mode=04755"}, 2, "", "permission bits in octal"},
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
	for _, f := range []string{"config", "redis", "grpc-addr", "http-addr", "shadow", "response-headers", "log-format", "log-level", "timeout", "max-descriptors", "max-entries", "max-descriptor-bytes", "max-message-bytes", "grpc-max-streams", "grpc-max-connections", "grpc-max-pending-bytes", "grpc-max-connection-age", "allowed-hosts", "redis-url-file", "dashboard", "tls-cert-file", "tls-key-file", "tls-client-ca-file", "http-tls", "unix-socket-mode", "tracing", "quota-mode", "response-dynamic-metadata", "counting", "merge-domains"} {
		if !strings.Contains(out.String(), "--"+f+" ") && !strings.Contains(out.String(), "--"+f+"   ") {
			t.Errorf("--help does not list --%s", f)
		}
		if env := "REDLIMIT_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_")); !strings.Contains(out.String(), "(env "+env+")") {
			t.Errorf("--help does not name %s", env)
		}
	}
}

// A numeric flag of serve given 0 or a negative value is a usage error
// naming the flag (exit 2), on the command line or in its environment
// variable: none documents a meaning for it, and the server used to put
// its default in its place without a word (--shutdown-timeout=-1s served
// with 10 s, --grpc-max-connections=0 with 1024). --grpc-addr=unix: makes
// a run that gets past the flags fail at once (exit 1) instead of serving.
func TestServeFlagsNotPositive(t *testing.T) {
	t.Parallel()
	durations := []string{"timeout", "max-override-period", "grpc-max-connection-age", "shutdown-timeout"}
	counts := []string{"max-config-file-bytes", "max-config-bytes", "memory-max-keys", "memory-max-bytes", "max-descriptors", "max-entries", "max-descriptor-bytes", "max-message-bytes", "grpc-max-streams", "http-max-connections", "grpc-max-connections", "grpc-max-pending-bytes"}
	type bad struct{ flag, value string }
	var cases []bad
	for _, f := range durations {
		cases = append(cases, bad{f, "-1s"}, bad{f, "0s"}, bad{f, "-1ns"})
	}
	for _, f := range counts {
		cases = append(cases, bad{f, "-1"}, bad{f, "0"})
	}
	cases = append(cases, bad{"unix-socket-mode", "0"})
	for _, tc := range cases {
		args := []string{"serve", "--grpc-addr=unix:", "--" + tc.flag + "=" + tc.value}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--"+tc.flag) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message naming --%s", args[1:], code, strings.TrimSpace(errb.String()), tc.flag)
		}
	}
}
