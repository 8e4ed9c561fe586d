package server

import (
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/service/internal/rls"
	"github.com/redlimit/redlimit/service/internal/xds"
)

// mapFlag is a list of key<sep>value pairs separated by commas; each Set
// replaces it.
type mapFlag struct {
	m   *map[string]string
	sep string
}

func (f mapFlag) String() string {
	if f.m == nil || len(*f.m) == 0 {
		return ""
	}
	pairs := make([]string, 0, len(*f.m))
	for k, v := range *f.m {
		pairs = append(pairs, k+f.sep+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func (f mapFlag) Set(s string) error {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, f.sep)
		if !ok || k == "" {
			return fmt.Errorf("%q: want key%svalue pairs separated by commas", p, f.sep)
		}
		m[k] = v
	}
	*f.m = m
	return nil
}

// registerEnvoyStatsFlags defines the flags of envoyproxy/ratelimit's
// metrics and of the xDS rule source on fs, into o.
func registerEnvoyStatsFlags(fs *flag.FlagSet, o *Options) {
	fs.BoolVar(&o.EnvoyMetrics, "envoy-metrics", false, "serve envoyproxy/ratelimit's per-rule series beside redlimit's (USE_PROMETHEUS):\nratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}{domain,key1,key2}")
	fs.StringVar(&o.PrometheusAddr, "prometheus-addr", "", "also serve the metrics on this `address` (PROMETHEUS_ADDR), at --prometheus-path")
	fs.StringVar(&o.PrometheusPath, "prometheus-path", "/metrics", "`path` of the metrics on --prometheus-addr (PROMETHEUS_PATH)")
	fs.Float64Var(&o.NearLimitRatio, "near-limit-ratio", rls.DefaultNearLimitRatio, "near_limit counts the hits above this `fraction` of a limit (NEAR_LIMIT_RATIO)")
	fs.StringVar(&o.StatsdAddr, "statsd-addr", "", "send envoyproxy/ratelimit's per-rule counters to this statsd `host:port` over TCP\n(USE_STATSD, STATSD_HOST, STATSD_PORT)")
	fs.Var(mapFlag{&o.StatsdTags, ":"}, "statsd-tags", "`key:value,...` tags ending every statsd name as .__key=value (EXTRA_TAGS)")
	fs.DurationVar(&o.StatsFlushInterval, "stats-flush-interval", DefaultStatsFlushInterval, "how often the statsd counters are sent (STATS_FLUSH_INTERVAL)")
	fs.StringVar(&o.XDS.ServerURL, "xds-server", "", "take the rules from this xDS server `address` instead of --config: RateLimitConfig resources,\nas Envoy Gateway serves them (CONFIG_TYPE=GRPC_XDS_SOTW, CONFIG_GRPC_XDS_SERVER_URL). Not ready until the\nfirst update; a bad update is refused (NACK) and the rules in use keep serving")
	fs.StringVar(&o.XDS.NodeID, "xds-node-id", xds.DefaultNodeID, "node `ID` given to the xDS server (CONFIG_GRPC_XDS_NODE_ID)")
	fs.Var(mapFlag{&o.XDS.NodeMetadata, "="}, "xds-node-metadata", "`key=value,...` node metadata given to the xDS server (CONFIG_GRPC_XDS_NODE_METADATA)")
	fs.Var(mapFlag{&o.XDS.Headers, ":"}, "xds-headers", "`key:value,...` gRPC metadata sent to the xDS server (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS)")
	fs.BoolVar(&o.XDS.TLS, "xds-tls", false, "connect to the xDS server over TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS)")
	fs.StringVar(&o.XDS.CAFile, "xds-ca-file", "", "PEM `file` of the CAs trusted for the xDS server (CONFIG_GRPC_XDS_SERVER_TLS_CACERT; default the system's)")
	fs.StringVar(&o.XDS.CertFile, "xds-cert-file", "", "PEM `file` of the client certificate for the xDS server (CONFIG_GRPC_XDS_CLIENT_TLS_CERT)")
	fs.StringVar(&o.XDS.KeyFile, "xds-key-file", "", "PEM `file` of its key (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)")
	fs.StringVar(&o.XDS.ServerName, "xds-server-name", "", "`name` the xDS server's certificate must hold (CONFIG_GRPC_XDS_SERVER_TLS_SAN)")
	fs.DurationVar(&o.XDS.MinBackoff, "xds-min-backoff", xds.DefaultMinBackoff, "first wait before connecting to a lost xDS server again, doubling (XDS_CLIENT_BACKOFF_INITIAL_INTERVAL)")
	fs.DurationVar(&o.XDS.MaxBackoff, "xds-max-backoff", xds.DefaultMaxBackoff, "longest wait before connecting again (XDS_CLIENT_BACKOFF_MAX_INTERVAL)")
	fs.IntVar(&o.XDS.MaxMessageBytes, "xds-max-message-bytes", 4<<20, "largest xDS update, in bytes (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES)")
}

// statsVar maps one of envoyproxy/ratelimit's variables onto a flag.
type statsVar struct {
	env, flag string
	// value returns the flag's value for the variable's v, or ok false
	// to leave the flag alone. nil: v as it is.
	value func(v string, lookup func(string) (string, bool)) (flagValue string, ok bool, err error)
}

// statsVars are envoyproxy/ratelimit's variables of metrics and xDS,
// in the order they are applied.
var statsVars = []statsVar{
	{"USE_PROMETHEUS", "envoy-metrics", nil},
	{"USE_PROMETHEUS", "prometheus-addr", whenTrue("PROMETHEUS_ADDR", ":9090")},
	{"USE_PROMETHEUS", "prometheus-path", whenTrue("PROMETHEUS_PATH", "/metrics")},
	{"NEAR_LIMIT_RATIO", "near-limit-ratio", nil},
	{"STATSD_HOST", "statsd-addr", statsdAddr}, // and USE_STATSD, STATSD_PORT
	{"STATSD_PORT", "statsd-addr", statsdAddr},
	{"USE_STATSD", "statsd-addr", statsdAddr},
	{"EXTRA_TAGS", "statsd-tags", nil},
	{"STATS_FLUSH_INTERVAL", "stats-flush-interval", nil},
	{"CONFIG_TYPE", "xds-server", xdsServer},
	{"CONFIG_GRPC_XDS_NODE_ID", "xds-node-id", nil},
	{"CONFIG_GRPC_XDS_NODE_METADATA", "xds-node-metadata", nil},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "xds-headers", nil},
	{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "xds-tls", nil},
	{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "xds-ca-file", nil},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "xds-cert-file", nil},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "xds-key-file", nil},
	{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds-server-name", nil},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "xds-min-backoff", nil},
	{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "xds-max-backoff", nil},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "xds-max-message-bytes", nil},
}

// setEnvoyStatsEnv sets the flags of fs that envoyproxy/ratelimit's
// variables of metrics and xDS mean, as lookup finds them. Call it before
// the REDLIMIT_ variables and the command line, which win. An error names
// the variable.
func setEnvoyStatsEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	for _, e := range statsVars {
		v, set := lookup(e.env)
		if !set {
			continue
		}
		fv, ok := v, true
		if e.value != nil {
			var err error
			if fv, ok, err = e.value(v, lookup); err != nil {
				return fmt.Errorf("%s=%q: %w", e.env, v, err)
			}
		}
		if !ok {
			continue
		}
		if e.flag == "near-limit-ratio" {
			if r, err := strconv.ParseFloat(fv, 64); err != nil || r <= 0 || r > 1 {
				return fmt.Errorf("%s=%q: want a fraction in (0, 1]", e.env, v)
			}
		}
		if err := fs.Set(e.flag, fv); err != nil {
			return fmt.Errorf("%s=%q: %w", e.env, v, err)
		}
	}
	return nil
}

// envBool parses a variable as envoyproxy/ratelimit does (strconv).
func envBool(v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("want true or false")
	}
	return b, nil
}

// whenTrue returns the value of variable name (def if unset) when the
// variable mapped is true.
func whenTrue(name, def string) func(string, func(string) (string, bool)) (string, bool, error) {
	return func(v string, lookup func(string) (string, bool)) (string, bool, error) {
		on, err := envBool(v)
		if err != nil || !on {
			return "", false, err
		}
		if s, ok := lookup(name); ok && s != "" {
			return s, true, nil
		}
		return def, true, nil
	}
}

// statsdAddr returns STATSD_HOST:STATSD_PORT (defaults localhost, 8125)
// when USE_STATSD is true, or is unset while STATSD_HOST or STATSD_PORT is
// set.
func statsdAddr(_ string, lookup func(string) (string, bool)) (string, bool, error) {
	if use, ok := lookup("USE_STATSD"); ok {
		on, err := envBool(use)
		if err != nil {
			return "", false, fmt.Errorf("USE_STATSD: %w", err)
		}
		if !on {
			return "", false, nil
		}
	}
	host, ok := lookup("STATSD_HOST")
	if !ok || host == "" {
		host = "localhost"
	}
	port, ok := lookup("STATSD_PORT")
	if !ok || port == "" {
		port = "8125"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", false, fmt.Errorf("STATSD_PORT %q: want a port number", port)
	}
	return net.JoinHostPort(host, port), true, nil
}

// xdsServer returns CONFIG_GRPC_XDS_SERVER_URL (default localhost:18000)
// when CONFIG_TYPE is GRPC_XDS_SOTW.
func xdsServer(v string, lookup func(string) (string, bool)) (string, bool, error) {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "", "FILE":
		return "", false, nil
	case "GRPC_XDS_SOTW":
		if u, ok := lookup("CONFIG_GRPC_XDS_SERVER_URL"); ok && u != "" {
			return u, true, nil
		}
		return "localhost:18000", true, nil
	}
	return "", false, fmt.Errorf("want FILE or GRPC_XDS_SOTW")
}
