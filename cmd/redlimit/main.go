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
// drives a closed loop of requests at the library (memory or a Redis URL) or
// at a running service (RLS gRPC or /json) and reports decisions per second
// and latency percentiles (internal/loadgen).
//
//	redlimit simulate [flags]
//
// replays a traffic pattern through every algorithm on a virtual clock and
// reports what each admitted, with an SVG chart (internal/sim).
//
// Every flag of serve can also be set by an
// environment variable, REDLIMIT_ and the flag's name in upper case with
// '-' as '_' (--grpc-addr: REDLIMIT_GRPC_ADDR); a flag on the command line
// wins. `redlimit serve --help` lists them.
//
// The command only wires flags to internal/server, internal/loadgen and
// internal/sim, where the logic lives.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redlimit/redlimit/internal/loadgen"
	"github.com/redlimit/redlimit/internal/rls"
	"github.com/redlimit/redlimit/internal/server"
	"github.com/redlimit/redlimit/internal/sim"
	"github.com/redlimit/redlimit/resilient"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `redlimit: a distributed rate limiter on Redis.

Usage:
  redlimit serve [flags]      serve the Envoy Rate Limit Service (gRPC) and HTTP
  redlimit bench [flags]      load-test the library or a running service
  redlimit simulate [flags]   replay a traffic pattern through every algorithm
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
		return serve(args[1:], stdout, stderr)
	case "bench":
		return loadgen.Main(args[1:], stdout, stderr)
	case "simulate":
		return sim.Main(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "redlimit: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// headersFlag is --response-headers: a flag that may stand alone (ietf).
type headersFlag struct{ h *rls.Headers }

func (f headersFlag) String() string {
	if f.h == nil {
		return ""
	}
	return f.h.String()
}

func (f headersFlag) Set(s string) error {
	h, err := rls.ParseHeaders(s)
	if err != nil {
		return err
	}
	*f.h = h
	return nil
}

func (headersFlag) IsBoolFlag() bool { return true }

// serve runs "redlimit serve args" until SIGTERM or SIGINT.
func serve(args []string, stdout, stderr io.Writer) int {
	var (
		o         server.Options
		dashboard bool
		logFormat string
		logLevel  slog.Level
	)
	fs := flag.NewFlagSet("redlimit serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ConfigPath, "config", "", "rule `path`: a YAML file, or a directory of *.yaml and *.yml files (one domain each),\nwatched and reloaded on change and on SIGHUP. Empty: no rules, every request allowed")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` that keeps the limits, shared by every instance: redis://[user[:password]@]host:port[/db],\nrediss:// for TLS (?ca_file=...), ?addr=host:port for more Cluster seeds, ?master_set=name for Sentinel.\nEmpty: an in-memory store, for this process alone")
	fs.StringVar(&o.RedisPrefix, "redis-prefix", "", "`text` starting every Redis key; instances that share limits must share it (default \"redlimit:\")")
	fs.DurationVar(&o.Timeout, "timeout", resilient.DefaultTimeout, "deadline of each Redis call; past it, or while Redis fails, each rule's failure_policy answers.\nKeep it below the proxy's own timeout (Envoy's rate limit filter: 20ms by default), or the proxy gives up first")
	fs.StringVar(&o.GRPCAddr, "grpc-addr", server.DefaultGRPCAddr, "gRPC listen `address` (RLS v3, health, reflection)")
	fs.StringVar(&o.HTTPAddr, "http-addr", server.DefaultHTTPAddr, "HTTP listen `address` (/json, /healthz, /readyz, /metrics, /rules, the dashboard at /)")
	fs.BoolVar(&o.Shadow, "shadow", false, "shadow mode for every rule: decide and count, never deny")
	fs.Var(headersFlag{&o.Headers}, "response-headers", "rate-limit response header `mode`, from the limit closest to running out:\nietf (draft-10 RateLimit-Policy and RateLimit, the choice when the flag stands alone),\nx-ratelimit (X-RateLimit-Limit/Remaining/Reset) or envoy (RateLimit-Limit/Remaining/Reset).\nWrite --response-headers=envoy; default off")
	fs.IntVar(&o.MaxDescriptors, "max-descriptors", rls.DefaultMaxDescriptors, "most descriptors in one request (at most 64)")
	fs.IntVar(&o.MaxEntries, "max-entries", rls.DefaultMaxEntries, "most entries in one descriptor")
	fs.IntVar(&o.MaxBytes, "max-descriptor-bytes", rls.DefaultMaxBytes, "most bytes of domain, keys and values in one request")
	fs.IntVar(&o.MaxMessageBytes, "max-message-bytes", server.DefaultMaxMessageBytes, "largest gRPC message and /json body, in bytes")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long requests in flight may finish after SIGTERM or SIGINT")
	fs.BoolVar(&dashboard, "dashboard", true, "serve the live dashboard at / on the HTTP address: decisions, most limited keys, backend\nlatency and errors, breaker, rules, a form to try a request (it shows keys: keep the address private).\n--dashboard=false turns it off")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve runtime profiles under /debug/pprof/ on the HTTP address (keep it private)")
	fs.StringVar(&logFormat, "log-format", "text", "log `format`: text or json")
	fs.TextVar(&logLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	fs.Usage = func() {} // the error is printed by Parse; --help below

	if err := fromEnv(fs, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "redlimit serve: %v\n", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stdout)
			return 0
		}
		fmt.Fprintln(stderr, `Run "redlimit serve --help" for the flags.`)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redlimit serve: unexpected argument %q (flags with a value: --name=value)\n", fs.Arg(0))
		return 2
	}
	o.NoDashboard = !dashboard
	var h slog.Handler
	switch logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel})
	case "json":
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel})
	default:
		fmt.Fprintf(stderr, "redlimit serve: --log-format %q: want text or json\n", logFormat)
		return 2
	}
	o.Logger = slog.New(h)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := server.New(ctx, o)
	if err != nil {
		o.Logger.Error("cannot start", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				o.Logger.Info("SIGHUP: reloading the configuration")
				srv.Reload()
			}
		}
	}()
	if err := srv.Run(ctx); err != nil {
		o.Logger.Error("stopped", "err", err)
		return 1
	}
	o.Logger.Info("stopped")
	return 0
}

// envName returns the environment variable of a flag: REDLIMIT_GRPC_ADDR
// for grpc-addr.
func envName(flag string) string {
	return "REDLIMIT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv sets every flag of fs whose environment variable is set.
func fromEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := lookup(envName(f.Name)); ok && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// printUsage lists the flags with their environment variables.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `Usage: redlimit serve [flags]

Serves the Envoy Rate Limit Service v3 (envoy.service.ratelimit.v3.RateLimitService)
over gRPC, with the gRPC health and reflection services, and over HTTP:
POST /json, GET /healthz, /readyz, /metrics, /rules, and the live dashboard at /.

Every flag can be set by the environment variable shown; a flag given on the
command line wins. SIGHUP reloads the configuration; SIGTERM and SIGINT shut
down gracefully.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s   (env %s)\n", line, envName(f.Name))
		for _, l := range strings.Split(help, "\n") {
			fmt.Fprintf(w, "      %s\n", l)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, "      default: %s\n", f.DefValue)
		}
	})
}
