package server

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/service/internal/config"
)

// ErrEnvoyEnv reports a setting of envoyproxy/ratelimit's environment whose
// value cannot work here. Start-up stops on it.
var ErrEnvoyEnv = errors.New("envoyproxy/ratelimit setting")

// envoyVar is one setting of envoyproxy/ratelimit's environment (its
// src/settings/settings.go) and what serve makes of it.
type envoyVar struct {
	// name is the environment variable.
	name string
	// flags are the serve flags it sets (with others of its group).
	flags []string
	// unused, when not empty, is what redlimit does instead. Serve names a
	// set variable with it once in its start-up log.
	unused string
	// def is envoyproxy/ratelimit's default, taken when serve runs as
	// ratelimit; empty: redlimit's own default stays.
	def string
}

// otherPart marks the settings another part of serve reads (metrics, the
// xDS config source): they are neither mapped nor named as unused here.
const otherPart = "read by the metrics or the xDS config source"

// envoyVars is every setting of envoyproxy/ratelimit's environment. The
// table of docs/MIGRATING.md is checked against it.
var envoyVars = []envoyVar{
	// Listeners.
	{name: "HOST", flags: []string{"http-addr"}, def: "0.0.0.0"},
	{name: "PORT", flags: []string{"http-addr"}, def: "8080"},
	{name: "GRPC_HOST", flags: []string{"grpc-addr"}, def: "0.0.0.0"},
	{name: "GRPC_PORT", flags: []string{"grpc-addr"}, def: "8081"},
	{name: "GRPC_UDS", flags: []string{"grpc-addr"}},
	{name: "DEBUG_HOST", unused: "no debug listener: /metrics, /rules and (with --pprof) /debug/pprof/ are on the HTTP address"},
	{name: "DEBUG_PORT", unused: "no debug listener: /metrics, /rules and (with --pprof) /debug/pprof/ are on the HTTP address"},
	{name: "GRPC_MAX_CONNECTION_AGE", flags: []string{"grpc-max-connection-age"}},
	{name: "GRPC_MAX_CONNECTION_AGE_GRACE", unused: "a connection past its age has 10s to finish its requests"},
	// TLS.
	{name: "GRPC_SERVER_USE_TLS", flags: []string{"tls-cert-file", "tls-key-file", "http-tls"}},
	{name: "GRPC_SERVER_TLS_CERT", flags: []string{"tls-cert-file"}},
	{name: "GRPC_SERVER_TLS_KEY", flags: []string{"tls-key-file"}},
	{name: "GRPC_CLIENT_TLS_CACERT", flags: []string{"tls-client-ca-file"}},
	{name: "GRPC_CLIENT_TLS_SAN", flags: []string{"tls-client-san"}},
	// Logs.
	{name: "LOG_LEVEL", flags: []string{"log-level"}, def: "warn"},
	{name: "LOG_FORMAT", flags: []string{"log-format"}},
	// Rule files.
	{name: "RUNTIME_ROOT", flags: []string{"config"}, def: "/srv/runtime_data/current"},
	{name: "RUNTIME_SUBDIRECTORY", flags: []string{"config"}},
	{name: "RUNTIME_APPDIRECTORY", flags: []string{"config"}, def: "config"},
	{name: "RUNTIME_WATCH_ROOT", unused: "the rule directory is always watched, through every symbolic link on its path"},
	{name: "RUNTIME_IGNOREDOTFILES", unused: "files whose names start with a dot are always ignored"},
	{name: "MERGE_DOMAIN_CONFIG", flags: []string{"merge-domains"}},
	{name: "FORCE_START_WITHOUT_INITIAL_CONFIG", unused: "serve always starts before the xDS server's first update; /readyz answers ready once it applied"},
	{name: "CONFIG_TYPE", unused: otherPart},
	// Redis.
	{name: "BACKEND_TYPE", flags: []string{"redis"}},
	{name: "REDIS_SOCKET_TYPE", flags: []string{"redis"}, def: "unix"},
	{name: "REDIS_TYPE", flags: []string{"redis"}, def: "SINGLE"},
	{name: "REDIS_URL", flags: []string{"redis"}, def: "/var/run/nutcracker/ratelimit.sock"},
	{name: "REDIS_AUTH", flags: []string{"redis"}},
	{name: "REDIS_TLS", flags: []string{"redis"}},
	{name: "REDIS_TLS_CACERT", flags: []string{"redis"}},
	{name: "REDIS_TLS_CLIENT_CERT", flags: []string{"redis"}},
	{name: "REDIS_TLS_CLIENT_KEY", flags: []string{"redis"}},
	{name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", flags: []string{"redis"}},
	{name: "REDIS_SENTINEL_AUTH", flags: []string{"redis"}},
	{name: "REDIS_TIMEOUT", flags: []string{"timeout"}},
	{name: "CACHE_KEY_PREFIX", flags: []string{"redis-prefix"}},
	{name: "REDIS_POOL_SIZE", unused: "one multiplexed connection per Redis node, pipelined automatically"},
	{name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", unused: "no pool: requests are pipelined on one connection per node"},
	{name: "REDIS_PIPELINE_WINDOW", unused: "concurrent decisions are batched into one script call per node automatically"},
	{name: "REDIS_PIPELINE_LIMIT", unused: "concurrent decisions are batched into one script call per node automatically"},
	{name: "REDIS_CLUSTER_PIPELINE_PARALLELISM", unused: "every Cluster node is called in parallel"},
	{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", unused: "/readyz PINGs Redis on each call"},
	{name: "REDIS_STARTUP_INITIAL_INTERVAL", unused: "start-up fails at once when Redis does not answer; the orchestrator restarts it"},
	{name: "REDIS_STARTUP_MAX_INTERVAL", unused: "start-up fails at once when Redis does not answer; the orchestrator restarts it"},
	{name: "REDIS_STARTUP_MAX_ELAPSED_TIME", unused: "start-up fails at once when Redis does not answer; the orchestrator restarts it"},
	{name: "REDIS_PERSECOND", unused: "one Redis keeps every limit, per-second ones too (REDIS_URL's)"},
	{name: "REDIS_PERSECOND_*", unused: "one Redis keeps every limit, per-second ones too (REDIS_URL's)"},
	{name: "EXPIRATION_JITTER_MAX_SECONDS", unused: "each key expires when its state is worthless; no jitter is needed"},
	{name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", flags: []string{"counting"}},
	{name: "MEMCACHE_*", unused: "no memcached backend (BACKEND_TYPE=memcache stops start-up)"},
	// Behaviour.
	{name: "SHADOW_MODE", flags: []string{"shadow"}},
	{name: "QUOTA_MODE", flags: []string{"quota-mode"}},
	{name: "RESPONSE_DYNAMIC_METADATA", flags: []string{"response-dynamic-metadata"}},
	{name: "LIMIT_RESPONSE_HEADERS_ENABLED", flags: []string{"response-headers"}},
	{name: "LIMIT_LIMIT_HEADER", flags: []string{"response-header-names"}},
	{name: "LIMIT_REMAINING_HEADER", flags: []string{"response-header-names"}},
	{name: "LIMIT_RESET_HEADER", flags: []string{"response-header-names"}},
	{name: "LOCAL_CACHE_SIZE_IN_BYTES", flags: []string{"deny-cache-bytes"}, def: "0"},
	{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", unused: "/readyz answers ready once rules loaded and Redis answers a PING"},
	{name: "NEAR_LIMIT_RATIO", unused: otherPart},
	// Tracing.
	{name: "TRACING_ENABLED", flags: []string{"tracing"}},
	{name: "TRACING_SERVICE_NAME", flags: []string{"tracing"}},
	{name: "TRACING_SERVICE_NAMESPACE", flags: []string{"tracing"}},
	{name: "TRACING_SERVICE_INSTANCE_ID", flags: []string{"tracing"}},
	{name: "TRACING_EXPORTER_PROTOCOL", flags: []string{"tracing"}},
	{name: "TRACING_SAMPLING_RATE", flags: []string{"tracing"}},
	// Metrics and xDS: read elsewhere.
	{name: "USE_PROMETHEUS", unused: otherPart},
	{name: "USE_STATSD", unused: otherPart},
}

// envoyNote names a set variable redlimit has no use for, and what it does
// instead.
type envoyNote struct{ name, instead string }

// fromEnvoyEnv sets the flags of fs that envoyproxy/ratelimit's environment
// (lookup) sets, and the OTEL_* variables its TRACING_* ones mean; it
// returns the notes to log. Call it before the REDLIMIT_ variables and the
// command line set theirs, so that they win.
func fromEnvoyEnv(fs *flag.FlagSet, lookup func(string) (string, bool), asRatelimit bool) ([]envoyNote, error) {
	flags, otel, notes, err := envoyEnv(lookup, asRatelimit)
	if err != nil {
		return nil, err
	}
	for _, f := range flags {
		if err := fs.Set(f.flag, f.value); err != nil {
			return nil, fmt.Errorf("%w: as --%s=%s: %v", ErrEnvoyEnv, f.flag, f.value, err)
		}
	}
	for k, v := range otel {
		if err := os.Setenv(k, v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", k, err)
		}
	}
	return notes, nil
}

// applyCompat applies --compat to o: with "envoy", the flags of fs not
// given take envoyproxy/ratelimit's semantics.
func applyCompat(fs *flag.FlagSet, compat string, o *Options) error {
	switch compat {
	case CompatRedlimit:
		return nil
	case CompatEnvoy:
	default:
		return fmt.Errorf("--compat=%q (or %s): want %s or %s", compat, envName("compat"), CompatRedlimit, CompatEnvoy)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	o.DefaultAlgorithm = redlimit.FixedWindow
	if !given["counting"] {
		o.Counting = config.CountingDebit
	}
	if !given["deny-cache"] && !given["deny-cache-bytes"] {
		o.NoDenyCache = true
	}
	return nil
}

// flagValue is one flag value made from envoyproxy/ratelimit's environment.
type flagValue struct{ flag, value string }

// envoyEnv turns envoyproxy/ratelimit's environment into serve's flag
// values, OTEL_* variables for tracing (otel, only those not set already),
// and one note for each set variable redlimit has no use for. A variable
// unset keeps redlimit's default, unless a variable of its group is set
// (HOST with PORT, the RUNTIME_* and REDIS_* ones): then its
// envoyproxy/ratelimit default completes the group. asRatelimit (the
// binary invoked as ratelimit) makes every group complete. A value that
// cannot work is an error wrapping [ErrEnvoyEnv].
func envoyEnv(lookup func(string) (string, bool), asRatelimit bool) (flags []flagValue, otel map[string]string, notes []envoyNote, err error) {
	e := envoyReader{lookup: lookup, all: asRatelimit}
	var errs []error
	add := func(flag, value string) { flags = append(flags, flagValue{flag, value}) }
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrEnvoyEnv}, a...)...))
	}
	boolean := func(name string) bool {
		v, ok := e.get(name)
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			fail("%s=%q: want true or false", name, v)
		}
		return b
	}

	if e.any("HOST", "PORT") {
		add("http-addr", e.hostPort("HOST", "PORT"))
	}
	if uds, ok := e.get("GRPC_UDS"); ok && uds != "" {
		add("grpc-addr", "unix:"+uds)
	} else if e.any("GRPC_HOST", "GRPC_PORT") {
		add("grpc-addr", e.hostPort("GRPC_HOST", "GRPC_PORT"))
	}
	if v, ok := e.get("GRPC_MAX_CONNECTION_AGE"); ok {
		add("grpc-max-connection-age", v)
	}

	if boolean("GRPC_SERVER_USE_TLS") {
		cert, _ := e.get("GRPC_SERVER_TLS_CERT")
		key, _ := e.get("GRPC_SERVER_TLS_KEY")
		if cert == "" || key == "" {
			fail("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
		}
		// envoyproxy/ratelimit's TLS is gRPC's only.
		add("tls-cert-file", cert)
		add("tls-key-file", key)
		add("http-tls", "off")
		if ca, _ := e.get("GRPC_CLIENT_TLS_CACERT"); ca != "" {
			add("tls-client-ca-file", ca)
		}
		if san, _ := e.get("GRPC_CLIENT_TLS_SAN"); san != "" {
			add("tls-client-san", san)
		}
	}

	if v, ok := e.get("LOG_LEVEL"); ok {
		level, err := logLevel(v)
		if err != nil {
			fail("LOG_LEVEL=%q: %v", v, err)
		}
		add("log-level", level)
	}
	if v, ok := e.get("LOG_FORMAT"); ok {
		add("log-format", strings.ToLower(strings.TrimSpace(v)))
	}

	if e.any("RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY") {
		add("config", filepath.Join(e.grouped("RUNTIME_ROOT"), e.grouped("RUNTIME_SUBDIRECTORY"), e.grouped("RUNTIME_APPDIRECTORY")))
	}
	if _, ok := e.get("MERGE_DOMAIN_CONFIG"); ok {
		add("merge-domains", strconv.FormatBool(boolean("MERGE_DOMAIN_CONFIG")))
	}

	if u, ok, err := e.redisURL(boolean); err != nil {
		errs = append(errs, err)
	} else if ok {
		add("redis", u)
	}
	if v, ok := e.get("REDIS_TIMEOUT"); ok {
		add("timeout", v)
	}
	if v, _ := e.get("CACHE_KEY_PREFIX"); v != "" {
		add("redis-prefix", v)
	}
	if boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT") {
		add("counting", "admission")
	}

	for _, b := range [][2]string{{"SHADOW_MODE", "shadow"}, {"QUOTA_MODE", "quota-mode"}, {"RESPONSE_DYNAMIC_METADATA", "response-dynamic-metadata"}} {
		if _, ok := e.get(b[0]); ok {
			add(b[1], strconv.FormatBool(boolean(b[0])))
		}
	}
	if boolean("LIMIT_RESPONSE_HEADERS_ENABLED") {
		add("response-headers", "envoy")
		var renames []string
		for _, h := range [][2]string{{"LIMIT_LIMIT_HEADER", ratelimitfield.HeaderRateLimitLimit}, {"LIMIT_REMAINING_HEADER", ratelimitfield.HeaderRateLimitRemaining}, {"LIMIT_RESET_HEADER", ratelimitfield.HeaderRateLimitReset}} {
			if v, _ := e.get(h[0]); v != "" && !strings.EqualFold(v, h[1]) {
				renames = append(renames, h[1]+"="+v)
			}
		}
		if len(renames) > 0 {
			add("response-header-names", strings.Join(renames, ","))
		}
	}
	if v, ok := e.get("LOCAL_CACHE_SIZE_IN_BYTES"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 0:
			fail("LOCAL_CACHE_SIZE_IN_BYTES=%q: want a count of bytes", v)
		case n == 0:
			add("deny-cache", "false")
		default:
			add("deny-cache-bytes", strconv.FormatInt(n, 10))
		}
	}

	if boolean("TRACING_ENABLED") {
		add("tracing", "true")
		otel = e.otel(fail)
	}

	for _, v := range envoyVars {
		if v.unused == "" || v.unused == otherPart {
			continue
		}
		if name, ok := e.set(v.name); ok {
			notes = append(notes, envoyNote{name, v.unused})
		}
	}
	return flags, otel, notes, errors.Join(errs...)
}

// envoyReader reads envoyproxy/ratelimit's variables, with their defaults
// where a group is complete.
type envoyReader struct {
	lookup func(string) (string, bool)
	all    bool // every group complete: invoked as ratelimit
}

// get returns name's value, or its envoyproxy/ratelimit default when all
// groups are complete; ok reports whether either is there.
func (e envoyReader) get(name string) (string, bool) {
	if v, ok := e.lookup(name); ok {
		return v, true
	}
	if !e.all {
		return "", false
	}
	d := envoyDefault(name)
	return d, d != ""
}

// any reports whether one of names is set (or all groups are complete).
func (e envoyReader) any(names ...string) bool {
	for _, n := range names {
		if _, ok := e.lookup(n); ok {
			return true
		}
	}
	return e.all
}

// set reports whether the variable name is set; a name ending in "*"
// matches any of its prefix, and the first one set is returned.
func (e envoyReader) set(name string) (string, bool) {
	prefix, wild := strings.CutSuffix(name, "*")
	if !wild {
		_, ok := e.lookup(name)
		return name, ok
	}
	// Only the names envoyproxy/ratelimit reads with that prefix.
	for _, n := range wildcardNames[prefix] {
		if _, ok := e.lookup(prefix + n); ok {
			return prefix + n, true
		}
	}
	return "", false
}

// wildcardNames are the suffixes of the settings a wildcard row covers.
var wildcardNames = map[string][]string{
	"REDIS_PERSECOND_": {"SOCKET_TYPE", "TYPE", "URL", "POOL_SIZE", "AUTH", "TLS", "SENTINEL_AUTH", "PIPELINE_WINDOW", "PIPELINE_LIMIT", "CLUSTER_PIPELINE_PARALLELISM", "TIMEOUT", "POOL_ON_EMPTY_BEHAVIOR"},
	"MEMCACHE_":        {"HOST_PORT", "MAX_IDLE_CONNS", "SRV", "SRV_REFRESH", "TLS", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY", "TLS_CACERT", "TLS_SKIP_HOSTNAME_VERIFICATION"},
}

// envoyDefault returns envoyproxy/ratelimit's default of name, or "" when
// redlimit keeps its own.
func envoyDefault(name string) string {
	for _, v := range envoyVars {
		if v.name == name {
			return v.def
		}
	}
	return ""
}

// grouped returns name's value, or its envoyproxy/ratelimit default when
// unset: a variable of its group is set.
func (e envoyReader) grouped(name string) string {
	if v, ok := e.lookup(name); ok {
		return strings.TrimSpace(v)
	}
	return envoyDefault(name)
}

// hostPort joins two variables of a group into a listen address.
func (e envoyReader) hostPort(host, port string) string {
	return net.JoinHostPort(e.grouped(host), e.grouped(port))
}

// redisURL returns the --redis URL the REDIS_* variables name; ok is false
// when none is set (and serve does not run as ratelimit).
func (e envoyReader) redisURL(boolean func(string) bool) (string, bool, error) {
	fail := func(format string, a ...any) (string, bool, error) {
		return "", false, fmt.Errorf("%w: "+format, append([]any{ErrEnvoyEnv}, a...)...)
	}
	if b, ok := e.get("BACKEND_TYPE"); ok && !strings.EqualFold(strings.TrimSpace(b), "redis") {
		return fail("BACKEND_TYPE=%q: redlimit keeps limits in Redis only (BACKEND_TYPE=redis)", b)
	}
	if !e.any("REDIS_URL", "REDIS_TYPE", "REDIS_SOCKET_TYPE", "REDIS_AUTH", "REDIS_TLS", "BACKEND_TYPE") {
		return "", false, nil
	}
	get := e.grouped
	raw := get("REDIS_URL")
	if raw == "" {
		return fail("REDIS_URL is empty")
	}
	u := &url.URL{Scheme: "redis"}
	q := url.Values{}
	socket, kind := strings.ToLower(get("REDIS_SOCKET_TYPE")), strings.ToLower(get("REDIS_TYPE"))
	switch {
	case strings.Contains(raw, "://"):
		// Already a URL: taken as redlimit's --redis takes it.
		p, err := url.Parse(raw)
		if err != nil {
			return fail("REDIS_URL does not parse as a URL")
		}
		u, q = p, p.Query()
	case socket == "unix":
		if kind != "single" {
			return fail("REDIS_SOCKET_TYPE=unix with REDIS_TYPE=%s: a Unix socket names one Redis (REDIS_TYPE=single)", kind)
		}
		u.Scheme, u.Path = "unix", raw
	case socket == "tcp":
		addrs := strings.Split(raw, ",")
		if kind == "sentinel" {
			if len(addrs) < 2 {
				return fail("REDIS_TYPE=sentinel: REDIS_URL must be the master's name, then the sentinels: name,host:port[,host:port...]")
			}
			q.Set("master_set", strings.TrimSpace(addrs[0]))
			addrs = addrs[1:]
		} else if kind != "single" && kind != "cluster" {
			return fail("REDIS_TYPE=%q: want single, sentinel or cluster", kind)
		}
		if kind == "single" && len(addrs) > 1 {
			return fail("REDIS_TYPE=single: REDIS_URL must be one host:port")
		}
		for i, a := range addrs {
			a = strings.TrimSpace(a)
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fail("REDIS_URL %q: want host:port", a)
			}
			if i == 0 {
				u.Host = a
			} else {
				q.Add("addr", a)
			}
		}
	default:
		return fail("REDIS_SOCKET_TYPE=%q: want tcp or unix", socket)
	}
	if auth, _ := e.lookup("REDIS_AUTH"); auth != "" && u.User == nil {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.UserPassword("", auth)
		}
	}
	if boolean("REDIS_TLS") {
		if u.Scheme == "unix" {
			return fail("REDIS_TLS=true with a Unix socket")
		}
		u.Scheme = "rediss"
		if ca, _ := e.lookup("REDIS_TLS_CACERT"); ca != "" {
			q.Set("ca_file", ca)
		}
	}
	for _, name := range []string{"REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_SENTINEL_AUTH"} {
		if v, _ := e.lookup(name); v != "" {
			return fail("%s: not supported yet; Redis must accept redlimit without it", name)
		}
	}
	if boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION") {
		return fail("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=true: redlimit verifies Redis's certificate fully; " +
			"give Redis a certificate for its name, or set REDLIMIT_REDIS to a rediss:// URL with skip_verify=true")
	}
	// Checked as --redis would be, but for the CA file, read at start-up.
	check := maps.Clone(q)
	check.Del("ca_file")
	u.RawQuery = check.Encode()
	if _, err := redisstore.ParseURL(u.String()); err != nil {
		return fail("REDIS_URL=%q: %v", redisstore.Redacted(raw), err)
	}
	u.RawQuery = q.Encode()
	return u.String(), true, nil
}

// otel returns the OTEL_* variables the TRACING_* ones mean, leaving out
// those set already: the OTEL_* ones win.
func (e envoyReader) otel(fail func(string, ...any)) map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if _, ok := e.lookup(k); !ok && v != "" {
			out[k] = v
		}
	}
	name, ok := e.lookup("TRACING_SERVICE_NAME")
	if !ok {
		name = "RateLimit"
	}
	set("OTEL_SERVICE_NAME", name)
	var attrs []string
	if v, _ := e.lookup("TRACING_SERVICE_NAMESPACE"); v != "" {
		attrs = append(attrs, "service.namespace="+v)
	}
	if v, _ := e.lookup("TRACING_SERVICE_INSTANCE_ID"); v != "" {
		attrs = append(attrs, "service.instance.id="+v)
	}
	set("OTEL_RESOURCE_ATTRIBUTES", strings.Join(attrs, ","))
	if v, ok := e.lookup("TRACING_EXPORTER_PROTOCOL"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "http":
			set("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		case "grpc":
			set("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		default:
			fail("TRACING_EXPORTER_PROTOCOL=%q: want http or grpc", v)
		}
	}
	if v, ok := e.lookup("TRACING_SAMPLING_RATE"); ok {
		if r, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || r < 0 || r > 1 {
			fail("TRACING_SAMPLING_RATE=%q: want a ratio from 0 to 1", v)
		}
		set("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
		set("OTEL_TRACES_SAMPLER_ARG", strings.TrimSpace(v))
	}
	return out
}

// logLevel maps envoyproxy/ratelimit's log levels (logrus's) to slog's.
func logLevel(v string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(v)); l {
	case "trace", "debug":
		return "debug", nil
	case "info":
		return "info", nil
	case "warn", "warning":
		return "warn", nil
	case "error", "fatal", "panic":
		return "error", nil
	}
	return "", errors.New("want debug, info, warn or error")
}
