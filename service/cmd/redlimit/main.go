// Command redlimit runs the redlimit rate limit service, its load
// generator and its algorithm simulator.
//
//	redlimit serve [flags]
//
// serves the Envoy Rate Limit Service v3 over gRPC, and /json, /healthz,
// /readyz, /metrics, /rules and the live dashboard (at /) over HTTP.
//
//	redlimit bench [flags]
//
// drives a closed loop of requests at the library (memory or a Redis URL),
// or at a running service (RLS gRPC or /json). It reports decisions per
// second and latency percentiles (internal/loadgen).
//
//	redlimit simulate [flags]
//
// replays a traffic pattern through every algorithm on a virtual clock. It
// reports what each admitted, with an SVG chart (internal/sim).
//
//	redlimit check --config PATH [flags]
//
// loads rule files exactly as serve does and prints their rule tree. Or it
// prints every problem as file:line, and exits non-zero
// (internal/rulecheck).
//
//	redlimit version
//
// prints the version, the commit and the Go version of the build
// (internal/version); redlimit --version does the same.
//
// Every flag of serve can also be set by an environment variable. Its name
// is REDLIMIT_ and the flag's name in upper case, with '-' as '_'
// (--grpc-addr: REDLIMIT_GRPC_ADDR). A flag on the command line wins.
// `redlimit serve --help` lists them.
//
// It may be invoked as ratelimit: a link or copy named so, as the image's
// /bin/ratelimit. The command is then serve, and its arguments serve's
// flags. envoyproxy/ratelimit's defaults complete its environment. So the
// image swaps in for envoyproxy/ratelimit's under the command its
// manifests run.
//
// Each subcommand is a Main(args, stdout, stderr) int of its package. It
// parses its flags and returns the exit code: server.Main, rulecheck.Main,
// loadgen.Main and sim.Main. The command only picks one.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/redlimit/redlimit/service/internal/loadgen"
	"github.com/redlimit/redlimit/service/internal/rulecheck"
	"github.com/redlimit/redlimit/service/internal/server"
	"github.com/redlimit/redlimit/service/internal/sim"
	"github.com/redlimit/redlimit/service/internal/version"

	// Calendar rules load their time zone from the binary: a FROM scratch
	// image has no /usr/share/zoneinfo.
	_ "time/tzdata"
)

func main() {
	if invokedAs(os.Args[0]) == "ratelimit" {
		os.Exit(server.RatelimitMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// invokedAs returns the base name of argv0, the name the command was
// invoked by.
func invokedAs(argv0 string) string {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe")
}

const usage = `redlimit: a distributed rate limiter on Redis.

Usage:
  redlimit serve [flags]      serve the Envoy Rate Limit Service (gRPC) and HTTP
  redlimit check --config P   load rule files as serve would; print the rules or every problem
  redlimit bench [flags]      load-test the library or a running service
  redlimit simulate [flags]   replay a traffic pattern through every algorithm
  redlimit version            print the version, commit and Go version
  redlimit help               print this help

Run "redlimit COMMAND --help" for a command's flags.
`

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return server.Main(args[1:], stdout, stderr)
	case "check":
		return rulecheck.Main(args[1:], stdout, stderr)
	case "bench":
		return loadgen.Main(args[1:], stdout, stderr)
	case "simulate":
		return sim.Main(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.Get())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "redlimit: unknown command %q\n\n%s", args[0], usage)
	return 2
}
