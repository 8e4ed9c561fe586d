package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/resilient"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// headersFlag is --response-headers: a flag that may stand alone (ietf),
// off by default.
type headersFlag struct{ h *ratelimitfield.Style }

func (f headersFlag) String() string {
	switch {
	case f.h == nil:
		return ""
	case *f.h == ratelimitfield.None:
		return "off"
	case *f.h == ratelimitfield.Draft:
		return "ietf"
	}
	return f.h.String()
}

func (f headersFlag) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "on":
		*f.h = ratelimitfield.Draft
		return nil
	case "", "false":
		*f.h = ratelimitfield.None
		return nil
	}
	h, err := ratelimitfield.ParseStyle(s)
	if err != nil {
		return fmt.Errorf("unknown response headers %q (want ietf, x-ratelimit, envoy, all or off)", s)
	}
	*f.h = h
	return nil
}

func (headersFlag) IsBoolFlag() bool { return true }

// listFlag is a comma-separated list; each Set replaces it.
type listFlag struct{ l *[]string }

func (f listFlag) String() string {
	if f.l == nil {
		return ""
	}
	return strings.Join(*f.l, ",")
}

func (f listFlag) Set(s string) error {
	*f.l = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f.l = append(*f.l, v)
		}
	}
	return nil
}

// namesFlag is --response-header-names: comma-separated field=name pairs;
// each Set replaces them.
type namesFlag struct{ m *map[string]string }

func (f namesFlag) String() string {
	if f.m == nil {
		return ""
	}
	var pairs []string
	for k, v := range *f.m {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func (f namesFlag) Set(s string) error {
	*f.m = nil
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(from) == "" || strings.TrimSpace(to) == "" {
			return fmt.Errorf("%q: want field=name pairs, such as RateLimit-Limit=X-Limit", pair)
		}
		if *f.m == nil {
			*f.m = map[string]string{}
		}
		i := slices.IndexFunc(responseFields, func(n string) bool { return strings.EqualFold(n, strings.TrimSpace(from)) })
		if i < 0 {
			return fmt.Errorf("%q: not a response field (want one of %s)", from, strings.Join(responseFields, ", "))
		}
		(*f.m)[responseFields[i]] = strings.TrimSpace(to)
	}
	return nil
}

// responseFields are the fields --response-header-names may rename.
var responseFields = []string{
	ratelimitfield.HeaderRateLimitLimit, ratelimitfield.HeaderRateLimitRemaining, ratelimitfield.HeaderRateLimitReset,
	ratelimitfield.HeaderXRateLimitLimit, ratelimitfield.HeaderXRateLimitRemaining, ratelimitfield.HeaderXRateLimitReset,
	ratelimitfield.HeaderRateLimitPolicy, ratelimitfield.HeaderRateLimit, ratelimitfield.HeaderRetryAfter,
}

// Compat names the semantics --compat selects.
const (
	CompatRedlimit = "redlimit"
	CompatEnvoy    = "envoy"
)

// modeFlag is --unix-socket-mode: permission bits in octal (0660, 660 or
// 0o660).
type modeFlag struct{ m *os.FileMode }

func (f modeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return fmt.Sprintf("%#o", uint32(*f.m))
}

func (f modeFlag) Set(s string) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0o"), 8, 32)
	if err != nil || v&^uint64(os.ModePerm) != 0 {
		return fmt.Errorf("%q: want permission bits in octal, such as 0660", s)
	}
	*f.m = os.FileMode(v)
	return nil
}

// RatelimitMain runs serve as envoyproxy/ratelimit's binary, the command
// invoked as ratelimit: as [Main], with envoyproxy/ratelimit's default for
// each of its settings left unset (envoyenv.go).
func RatelimitMain(args []string, stdout, stderr io.Writer) int {
	return serve(args, stdout, stderr, true)
}

// Main runs `redlimit serve` with args (the flags after "serve"), until
// SIGTERM or SIGINT. Its help and errors go to stdout and stderr. It
// returns the process's exit code. That is 0, or 1 when the service
// cannot start or stops on an error, or 2 for a bad flag or environment
// variable. Every flag can also be set by an environment variable:
// REDLIMIT_ and the flag's name in upper case, with '-' as '_'
// (--grpc-addr: REDLIMIT_GRPC_ADDR). A flag on the command line wins.
// SIGHUP reloads the configuration and the TLS files.
// envoyproxy/ratelimit's environment variables set flags too, below
// REDLIMIT_ ones (envoyenv.go and docs/MIGRATING.md).
func Main(args []string, stdout, stderr io.Writer) int {
	return serve(args, stdout, stderr, false)
}

// serve is Main; asRatelimit takes envoyproxy/ratelimit's defaults.
func serve(args []string, stdout, stderr io.Writer, asRatelimit bool) int {
	var (
		o         Options
		dashboard bool
		denyCache bool
		compat    string
		logFormat string
		logLevel  slog.Level
	)
	fs := flag.NewFlagSet("redlimit serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ConfigPath, "config", "", "rule `path`: a YAML file, or a directory of *.yaml and *.yml files (one domain each),\nwatched and reloaded on change and on SIGHUP. Empty: no rules, every request allowed")
	fs.Int64Var(&o.MaxConfigFileBytes, "max-config-file-bytes", config.DefaultMaxFileBytes, "largest rule file loaded, in bytes")
	fs.Int64Var(&o.MaxConfigBytes, "max-config-bytes", config.DefaultMaxTotalBytes, "most bytes of all rule files together")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` that keeps the limits, shared by every instance: redis://[user[:password]@]host:port[/db],\nrediss:// for TLS (?ca_file=...), ?addr=host:port for more Cluster seeds, ?master_set=name for Sentinel.\nEmpty: an in-memory store, for this process alone. A password on the command line shows in ps:\nset REDLIMIT_REDIS, or --redis-url-file, instead")
	fs.StringVar(&o.RedisURLFile, "redis-url-file", "", "`file` holding the Redis URL (a mounted Secret, say), instead of --redis: keeps the password off\nthe command line")
	fs.IntVar(&o.MemoryMaxKeys, "memory-max-keys", memory.DefaultMaxKeys, "most states (key, algorithm, period) the in-memory store holds: the store without --redis, the\nlocal fallback with it. When full of states still in use, new keys are denied (redlimit_memory_refused_total)")
	fs.Int64Var(&o.MemoryMaxBytes, "memory-max-bytes", memory.DefaultMaxBytes, "most estimated `bytes` of the in-memory store's keys and states (the heap can reach about twice it)")
	fs.StringVar(&o.RedisPrefix, "redis-prefix", "", "`text` starting every Redis key; instances that share limits must share it (default \"redlimit:\")")
	fs.DurationVar(&o.Timeout, "timeout", resilient.DefaultTimeout, "deadline of each Redis call; past it, or while Redis fails, each rule's failure_policy answers.\nKeep it below the proxy's own timeout (Envoy's rate limit filter: 20ms by default), or the proxy gives up first")
	fs.StringVar(&o.GRPCAddr, "grpc-addr", DefaultGRPCAddr, "gRPC listen `address` (RLS v3, health, reflection): host:port, or unix:PATH for a Unix socket")
	fs.StringVar(&o.HTTPAddr, "http-addr", DefaultHTTPAddr, "HTTP listen `address` (/json, /healthz, /readyz, /metrics, /rules, the dashboard at /): host:port, or unix:PATH")
	fs.StringVar(&o.ProbeAddr, "probe-addr", "", "probe listen `address`: plain HTTP, whatever --http-tls says, serving /healthz, /readyz and /healthcheck\nalone, on connections of its own, so that clients holding the HTTP address's cannot starve the probes.\nhost:port, or unix:PATH. Empty: none (the probes use the HTTP address)")
	o.UnixSocketMode = DefaultUnixSocketMode
	fs.Var(modeFlag{&o.UnixSocketMode}, "unix-socket-mode", "permission `bits`, in octal, of the Unix sockets of unix:PATH addresses, set before any client can connect")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "PEM `file` of the server's certificate, followed by its chain. Set (with --tls-key-file), gRPC serves TLS only,\nand HTTP as --http-tls says. Watched and reloaded when it changes (a mounted Secret's update included); a file\nthat does not load is logged and counted (redlimit_tls_reloads_total) and the certificate in use keeps serving")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "PEM `file` of the certificate's private key; reloaded with the certificate")
	fs.StringVar(&o.TLSClientCAFile, "tls-client-ca-file", "", "PEM `file` of CA certificates: set, every gRPC client must present a certificate they signed (mutual TLS);\nreloaded with the certificate")
	fs.Var(listFlag{&o.TLSClientSANs}, "tls-client-san", "comma-separated `names`: set, a client certificate must also name one of them as a SAN (DNS name, URI such as\na SPIFFE ID, IP or email), or it is refused though --tls-client-ca-file's CA signed it")
	fs.TextVar(&o.HTTPTLS, "http-tls", HTTPTLSOn, "what the HTTP address serves with --tls-cert-file, a `mode`: on (TLS, no client certificate: probes and scrapers\nneed none), off (plain HTTP) or mtls (client certificates verified against --tls-client-ca-file, as on gRPC)")
	fs.BoolVar(&o.HTTPJSONWithoutClientCert, "http-json-without-client-cert", false, "with --tls-client-ca-file, let POST /json decide for HTTP clients that present no client certificate\n(--http-tls on or off). Without it, /json answers 403 unless --http-tls=mtls: a client gRPC refuses gets\nno decision over HTTP either")
	fs.Var(listFlag{&o.AllowedHosts}, "allowed-hosts", "comma-separated `names` the HTTP server answers as Host, besides IP addresses and localhost (always\nanswered, on any port): name, name:port, .domain (with its subdomains), or * for any Host. Others get 421,\nso that a web page cannot reach the dashboard, /json, /metrics or the profiles by DNS rebinding.\nList the names clients use (a Kubernetes Service, a load balancer)")
	fs.BoolVar(&o.Shadow, "shadow", false, "shadow mode for every rule: decide and count, never deny")
	fs.BoolVar(&o.QuotaMode, "quota-mode", false, "quota mode for every limit (envoyproxy/ratelimit's QUOTA_MODE): a request is denied only when every\ndescriptor of it that is not unlimited is over its limit")
	fs.BoolVar(&o.DynamicMetadata, "response-dynamic-metadata", false, "return dynamic metadata in every response (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA): the domain,\nthe descriptors, and the metadata of the rules the request passed, for Envoy to route or log on")
	o.Counting = config.CountingAuto
	fs.TextVar(&o.Counting, "counting", config.CountingAuto, "how the rules that set no counting count the hits of a request that does not fit, a `mode`:\nauto (a descriptor with its own hits_addend, Envoy's check-then-debit flow, is a debit; others admissions),\nadmission (denied, consuming nothing) or debit (every hit counted, as envoyproxy/ratelimit: may go into debt)")
	fs.StringVar(&compat, "compat", CompatRedlimit, "whose semantics the rules that name none follow, a `name`: redlimit, or envoy (envoyproxy/ratelimit's:\nfixed windows, every hit counted as a debit, no deny cache unless --deny-cache-bytes) for identical numbers\nduring a migration. --counting and --deny-cache given win")
	fs.BoolVar(&o.MergeDomains, "merge-domains", false, "merge the rule files of one domain into one tree (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); without it\na domain in two files is an error")
	o.Headers = ratelimitfield.None
	fs.Var(headersFlag{&o.Headers}, "response-headers", "rate-limit response header `mode`, from the limit closest to running out:\nietf (draft-10 RateLimit-Policy and RateLimit, the choice when the flag stands alone),\nx-ratelimit (X-RateLimit-Limit/Remaining/Reset), all (both) or envoy (RateLimit-Limit/Remaining/Reset).\nWrite --response-headers=envoy; default off")
	fs.Var(namesFlag{&o.HeaderNames}, "response-header-names", "comma-separated `field=name` pairs renaming response header fields, such as RateLimit-Limit=X-Limit\n(envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER)")
	fs.BoolVar(&denyCache, "deny-cache", true, "with --redis, answer a key denied with nothing left from memory until its retry-after, without Redis.\n--deny-cache=false sends every decision to Redis")
	fs.IntVar(&o.DenyCacheBytes, "deny-cache-bytes", resilient.DefaultCacheBytes, "most `bytes` the deny cache holds (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES)")
	fs.IntVar(&o.MaxDescriptors, "max-descriptors", rls.DefaultMaxDescriptors, "most descriptors in one request (at most 64)")
	fs.IntVar(&o.MaxEntries, "max-entries", rls.DefaultMaxEntries, "most entries in one descriptor")
	fs.IntVar(&o.MaxBytes, "max-descriptor-bytes", rls.DefaultMaxBytes, "most bytes of domain, keys and values in one request")
	fs.TextVar(&o.Overrides, "limit-overrides", rls.OverridesAllow, "descriptor limit override `policy`: allow (take all, as envoyproxy/ratelimit),\nno-raise (those that do not raise the matched rule's limit) or refuse (none: InvalidArgument)")
	fs.DurationVar(&o.MaxOverridePeriod, "max-override-period", rls.DefaultMaxOverridePeriod, "longest period a limit override may have (unit times unit_multiplier)")
	fs.IntVar(&o.MaxMessageBytes, "max-message-bytes", DefaultMaxMessageBytes, "largest gRPC message and /json body, in bytes")
	fs.IntVar(&o.GRPCMaxStreams, "grpc-max-streams", DefaultGRPCMaxStreams, "most requests in flight on one gRPC connection (Envoy opens another connection when it needs more)")
	fs.IntVar(&o.HTTPMaxConnections, "http-max-connections", DefaultHTTPMaxConnections, "most HTTP connections open at once; past it a new connection is closed at once (counted in\nredlimit_http_connections_refused_total)")
	fs.IntVar(&o.GRPCMaxConnections, "grpc-max-connections", DefaultGRPCMaxConnections, "most gRPC connections open at once; past it a new connection is closed at once (logged, and counted\nin redlimit_grpc_connections_refused_total). Envoy opens one per worker thread, or more")
	fs.Int64Var(&o.GRPCMaxPendingBytes, "grpc-max-pending-bytes", DefaultGRPCMaxPendingBytes, "most `bytes` the open gRPC streams may hold over all connections, as counted for each: 32 KiB,\nand what it received until it ends; past it the connection holding the most is closed")
	fs.DurationVar(&o.GRPCMaxConnectionAge, "grpc-max-connection-age", DefaultGRPCMaxConnectionAge, "how long a gRPC connection may live (plus or minus 10%) before the server closes it gracefully\n(GOAWAY) and its client connects again, perhaps to another instance")
	fs.DurationVar(&o.HTTPMaxConnectionAge, "http-max-connection-age", DefaultHTTPMaxConnectionAge, "how long an HTTP connection may live (plus or minus 10%): past it the server closes it after its next\nresponse, and cuts off a request still running 10 s later. Bounds how long a client whose CA left\n--tls-client-ca-file keeps an open connection under --http-tls=mtls")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "how long requests in flight may finish after SIGTERM or SIGINT")
	fs.BoolVar(&dashboard, "dashboard", true, "serve the live dashboard at / on the HTTP address: decisions, most limited keys, backend\nlatency and errors, breaker, rules, a form to try a request (it shows keys: keep the address private).\n--dashboard=false turns it off")
	fs.BoolVar(&o.Tracing, "tracing", false, "trace every decision with OpenTelemetry: a span per ShouldRateLimit and POST /json, the child of the request's\nW3C traceparent, with a child span per Redis call, exported over OTLP. The standard variables configure it:\nOTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc), OTEL_TRACES_SAMPLER and _ARG\n(default parentbased_traceidratio, ratio 1), OTEL_SERVICE_NAME, OTEL_TRACES_EXPORTER=none... Descriptor values are never recorded")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve runtime profiles under /debug/pprof/ on the HTTP address (keep it private; cmdline is not served,\nit would show secrets given on the command line)")
	fs.StringVar(&logFormat, "log-format", "text", "log `format`: text or json")
	fs.TextVar(&logLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	registerEnvoyStatsFlags(fs, &o)
	fs.Usage = func() {} // the error is printed by Parse; --help below

	if err := setEnvoyStatsEnv(fs, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "redlimit serve: %v\n", err)
		return 2
	}
	notes, err := fromEnvoyEnv(fs, os.LookupEnv, asRatelimit)
	if err != nil {
		fmt.Fprintf(stderr, "redlimit serve: %v\n", err)
		return 2
	}
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
	if err := positive(fs); err != nil {
		fmt.Fprintf(stderr, "redlimit serve: %v\n", err)
		return 2
	}
	o.NoDashboard = !dashboard
	o.NoDenyCache = !denyCache
	if err := applyCompat(fs, compat, &o); err != nil {
		fmt.Fprintf(stderr, "redlimit serve: %v\n", err)
		return 2
	}
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
	for _, n := range notes {
		o.Logger.Warn("envoyproxy/ratelimit setting not used", "setting", n.name, "instead", n.instead)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := New(ctx, o)
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
				o.Logger.Info("SIGHUP: reloading the configuration and the TLS files")
				srv.Reload()
				srv.ReloadTLS()
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

// positive returns an error naming the first numeric flag of fs (a count
// or a duration, and --unix-socket-mode) that is 0 or negative. None gives
// such a value a meaning, and Options would take 0 and most negatives for
// the default.
func positive(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		var bad bool
		if m, ok := f.Value.(modeFlag); ok {
			bad = *m.m == 0
		} else if g, ok := f.Value.(flag.Getter); ok {
			switch v := g.Get().(type) {
			case int:
				bad = v <= 0
			case int64:
				bad = v <= 0
			case time.Duration:
				bad = v <= 0
			}
		}
		if bad {
			err = fmt.Errorf("--%s=%s (or %s): must be more than 0", f.Name, f.Value, envName(f.Name))
		}
	})
	return err
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
