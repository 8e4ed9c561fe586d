package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	redlimitprom "github.com/redlimit/redlimit/prometheus"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/dashboard"
	"github.com/redlimit/redlimit/service/internal/fswatch"
	"github.com/redlimit/redlimit/service/internal/rls"
	"github.com/redlimit/redlimit/service/internal/tlsreload"
	"github.com/redlimit/redlimit/service/internal/tracing"
	"github.com/redlimit/redlimit/service/internal/version"
	"github.com/redlimit/redlimit/service/internal/xds"
)

// Defaults of [Options].
const (
	DefaultGRPCAddr        = "127.0.0.1:8081"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultMaxMessageBytes = 128 << 10
	DefaultShutdownTimeout = 10 * time.Second
	DefaultReloadDebounce  = 100 * time.Millisecond

	DefaultGRPCMaxStreams       = 100
	DefaultGRPCMaxConnections   = 1024
	DefaultGRPCMaxPendingBytes  = 128 << 20
	DefaultGRPCMaxConnectionAge = 30 * time.Minute
	DefaultHTTPMaxConnections   = 1024
	DefaultHTTPMaxConnectionAge = DefaultGRPCMaxConnectionAge
)

// probeMaxConnections caps the connections of the probe address: the
// kubelet opens one a probe.
const probeMaxConnections = 64

// tracingFlushTimeout bounds the export of the spans still queued when the
// server closes.
const tracingFlushTimeout = 5 * time.Second

// Options configure a [Server]. The zero value of each field is its default.
type Options struct {
	// ConfigPath is the rule file, or a directory of *.yaml and *.yml rule
	// files. Empty: no rules (every request is allowed), logged as a warning.
	ConfigPath string
	// MaxConfigFileBytes and MaxConfigBytes cap each rule file and all of
	// them together (defaults config.DefaultMaxFileBytes, 4 MiB, and
	// config.DefaultMaxTotalBytes, 16 MiB).
	MaxConfigFileBytes, MaxConfigBytes int64
	// MergeDomains merges the rule files of one domain, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG (config.Loader); without
	// it a domain in two files is an error.
	MergeDomains bool
	// RedisURL names the Redis that keeps the limits (see redisstore.Open).
	// Empty, with no RedisURLFile: an in-memory store, not shared with any
	// other instance. The server logs and reports it with its password
	// redacted (redisstore.Redacted).
	RedisURL string
	// RedisURLFile names a file that holds the Redis URL instead (a mounted
	// Secret, say), so that its password is on no command line; white space
	// around it is ignored. It must be a regular file of at most 64 KiB;
	// only one of RedisURL and RedisURLFile may be set.
	RedisURLFile string
	// MemoryMaxKeys and MemoryMaxBytes bound the in-memory store. Without
	// Redis, that is the store itself. With Redis, it is the local
	// fallback that the rules' failure policy "local" decides in. The
	// defaults are memory.DefaultMaxKeys and memory.DefaultMaxBytes. A full
	// store denies new keys. The heap can reach about twice MemoryMaxBytes
	// with Go's default GC settings.
	MemoryMaxKeys  int
	MemoryMaxBytes int64
	// RedisPrefix starts every Redis key (default redisstore.DefaultPrefix).
	// Instances that share limits must share it.
	RedisPrefix string
	// Timeout bounds each Redis call (default resilient.DefaultTimeout);
	// past it the rules' failure policies answer.
	Timeout time.Duration
	// GRPCAddr and HTTPAddr are the listen addresses (default
	// [DefaultGRPCAddr] and [DefaultHTTPAddr]). An address is host:port,
	// port 0 picking a free port. Or it is unix:PATH for a Unix socket.
	// unix:///PATH also names an absolute path, as gRPC clients write it.
	GRPCAddr, HTTPAddr string
	// ProbeAddr, when set, is a third listen address, plain HTTP whatever
	// the TLS options, that serves GET /healthz, /readyz and /healthcheck
	// alone: no decisions, metrics or rules. Its connections are not the
	// HTTP address's, so clients that hold all of those cannot starve the
	// probes. Keep it to the kubelet (a network policy that opens it to no
	// pod). Empty: no probe address.
	ProbeAddr string
	// UnixSocketMode is the permission bits of the Unix sockets the server
	// makes (default [DefaultUnixSocketMode], 0660: the owner and group may
	// connect). The socket has them from its first moment. A socket left
	// at the path by a process that is gone is replaced. One still served
	// is an error. The server removes its sockets when it stops.
	UnixSocketMode os.FileMode
	// TLSCertFile and TLSKeyFile name the PEM files of the server's
	// certificate (followed by its chain) and private key. Set, the gRPC
	// address serves TLS only (TLS 1.2 and up, ALPN h2). The HTTP address
	// serves as HTTPTLS says. The files are watched, and reloaded when they
	// change (package tlsreload). They may be written in place, renamed
	// over, or swapped behind a mounted Kubernetes Secret's link. New
	// handshakes take the new certificate; open connections keep theirs.
	// Some files do not load: missing, not whole PEM, a key of another
	// certificate, an expired certificate. At start-up they are an error.
	// At a reload they are logged and counted, while the certificate in use
	// keeps serving.
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile names a PEM file of CA certificates. Set, the gRPC
	// address requires of every client a certificate that chains to one
	// of them (mutual TLS); a handshake that fails is logged and counted.
	// It is reloaded with the certificate.
	TLSClientCAFile string
	// TLSClientSANs, when not empty, also requires that a gRPC client's
	// certificate names one of them as a SAN: a DNS name, URI, IP address
	// or email address. A certificate the CA signed for another is
	// refused. It needs TLSClientCAFile.
	TLSClientSANs []string
	// HTTPTLS says what the HTTP address serves when a certificate is set
	// (default [HTTPTLSOn]: TLS without client certificates).
	HTTPTLS HTTPTLS
	// HTTPJSONWithoutClientCert lets POST /json decide for clients without
	// a client certificate while gRPC requires one. Without it, /json
	// answers 403 then unless HTTPTLS is [HTTPTLSMutual]: a client the
	// gRPC address refuses gets no decision from the HTTP address either.
	HTTPJSONWithoutClientCert bool
	// Shadow puts every rule in shadow mode.
	Shadow bool
	// QuotaMode puts every limit in quota mode (rls.Options.QuotaMode,
	// envoyproxy/ratelimit's QUOTA_MODE).
	QuotaMode bool
	// DynamicMetadata has responses carry dynamic metadata
	// (rls.Options.DynamicMetadata, envoyproxy/ratelimit's
	// RESPONSE_DYNAMIC_METADATA).
	DynamicMetadata bool
	// Counting is the counting of the rules that set none (default
	// config.CountingAuto; see rls.Options.Counting).
	Counting config.Counting
	// Headers selects the rate-limit fields of responses (default
	// ratelimitfield.All; the serve command's flag defaults to None).
	Headers ratelimitfield.Style
	// HeaderNames renames response fields (rls.Options.HeaderNames).
	HeaderNames map[string]string
	// DefaultAlgorithm counts the limits whose rules name no algorithm
	// (default redlimit.SlidingWindow; see config.Loader), and the limit
	// overrides no rule matches.
	DefaultAlgorithm redlimit.Algorithm
	// DenyCacheBytes bounds the bytes of the in-process cache of denials
	// (resilient.DenyCacheOptions.Bytes); NoDenyCache turns that cache off, so
	// that every decision reaches Redis. Both apply with Redis only.
	DenyCacheBytes int
	NoDenyCache    bool
	// MaxDescriptors, MaxEntries and MaxBytes cap one request (defaults in
	// package rls).
	MaxDescriptors, MaxEntries, MaxBytes int
	// Overrides and MaxOverridePeriod bound the descriptors' limit
	// overrides (defaults in package rls: every override taken, periods up
	// to a year).
	Overrides         rls.OverridePolicy
	MaxOverridePeriod time.Duration
	// MaxMessageBytes caps a gRPC message and a /json body (default
	// [DefaultMaxMessageBytes], 128 KiB: every request the default
	// descriptor caps accept fits, with room to spare).
	MaxMessageBytes int
	// GRPCMaxStreams caps the requests in flight on one gRPC connection
	// (default [DefaultGRPCMaxStreams], the least HTTP/2 recommends); a
	// client that needs more opens another connection, as Envoy does.
	GRPCMaxStreams int
	// GRPCMaxConnections caps the gRPC connections open at once (default
	// [DefaultGRPCMaxConnections]); past it a new connection is closed at
	// once, logged and counted.
	GRPCMaxConnections int
	// HTTPMaxConnections caps the HTTP connections open at once (default
	// [DefaultHTTPMaxConnections]); past it a new connection is closed at
	// once and counted.
	HTTPMaxConnections int
	// GRPCMaxPendingBytes bounds the memory the gRPC server holds for
	// requests still arriving, over all connections (default
	// [DefaultGRPCMaxPendingBytes]); past it the connection that holds the
	// most is closed. It must leave room for one message of
	// MaxMessageBytes.
	GRPCMaxPendingBytes int64
	// GRPCMaxConnectionAge is how long a gRPC connection may live (default
	// [DefaultGRPCMaxConnectionAge], plus or minus 10%) before the server
	// closes it gracefully (GOAWAY) and its client connects again, perhaps
	// to another instance.
	GRPCMaxConnectionAge time.Duration
	// HTTPMaxConnectionAge is how long an HTTP connection may live (default
	// [DefaultHTTPMaxConnectionAge], plus or minus 10%). Past it, the
	// server closes it after its next response, and a request still
	// running 10 s after is cut off. It bounds how long a client refused by
	// a reloaded client CA (HTTPTLS mtls) keeps its open connections.
	HTTPMaxConnectionAge time.Duration
	// ShutdownTimeout bounds the graceful shutdown (default
	// [DefaultShutdownTimeout]); requests still running then are cut off.
	ShutdownTimeout time.Duration
	// ReloadDebounce is how long the config path must stay quiet after a
	// change before it is reloaded (default [DefaultReloadDebounce]).
	ReloadDebounce time.Duration
	// NoDashboard turns off the live dashboard, which is otherwise served
	// at / on the HTTP address (see package dashboard). The dashboard shows
	// decisions per second, the most limited keys, backend latency and
	// errors, the breaker, and the rules. It has a form to try a request.
	// It shows keys and rules, so keep the address private, or turn it off.
	NoDashboard bool
	// AllowedHosts lists the names the HTTP server answers as Host. It
	// always answers IP addresses and localhost, on any port. An entry is
	// "name" (any port), "name:port", ".domain" (the domain and its
	// subdomains), or "*" for any Host. A request for another Host gets 421
	// Misdirected Request. So a page that reaches the server by DNS
	// rebinding reads and changes nothing. Its attacker points a name at
	// the server's address. The names a deployment reaches the server by
	// must be listed: a Kubernetes Service, a load balancer. Addresses need
	// not be: a pod's IP, as probes and Prometheus use.
	AllowedHosts []string
	// Tracing traces every decision with OpenTelemetry (package tracing).
	// Each ShouldRateLimit call and POST /json is a span. It is the child
	// of the trace context the request carries (W3C traceparent). Each
	// limiter call is a child span. Spans are exported over OTLP, as the
	// standard OTEL_* environment variables say: endpoint, protocol,
	// sampler, service name. Off by default; off, it costs a decision
	// nothing.
	Tracing bool
	// TracerProvider, when not nil, makes the spans in place of the
	// exporter the environment configures, and turns tracing on; the
	// server does not shut it down. Tests give one that records in
	// memory.
	TracerProvider trace.TracerProvider
	// Pprof serves the runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the HTTP address. Off by default: profiles reveal
	// internals and cost CPU, keep the address private.
	Pprof bool
	// EnvoyMetrics counts hits as envoyproxy/ratelimit does and serves
	// the series its default statsd mapper makes, beside redlimit's own:
	// ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,
	// within_limit,shadow_mode}{domain,key1,key2} (USE_PROMETHEUS).
	EnvoyMetrics bool
	// PrometheusAddr, when set, serves the metrics at PrometheusPath
	// (default /metrics) on this address too (PROMETHEUS_ADDR,
	// PROMETHEUS_PATH).
	PrometheusAddr, PrometheusPath string
	// NearLimitRatio is where near_limit starts, a fraction of each limit
	// (default rls.DefaultNearLimitRatio; NEAR_LIMIT_RATIO).
	NearLimitRatio float64
	// StatsdAddr, when set, sends envoyproxy/ratelimit's per-rule counters
	// to this statsd server. It is host:port, over TCP as
	// envoyproxy/ratelimit does. They go every StatsFlushInterval (default
	// [DefaultStatsFlushInterval]). They are named
	// ratelimit.service.rate_limit.<rule>.<stat>. Each name ends with
	// StatsdTags as ".__key=value". The envoyproxy/ratelimit variables are
	// USE_STATSD, STATSD_HOST, STATSD_PORT, STATS_FLUSH_INTERVAL and
	// EXTRA_TAGS.
	StatsdAddr         string
	StatsdTags         map[string]string
	StatsFlushInterval time.Duration
	// XDS, with its ServerURL set, takes the rules from an xDS server
	// instead of ConfigPath.
	XDS XDSOptions
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger

	// loadConfig loads the configuration (default: config.Loader.Load);
	// tests put a load that hangs in its place.
	loadConfig func(context.Context, config.Loader, string) (*config.Config, error)
}

// Server is the redlimit rate limit service: the Envoy RLS v3 over gRPC,
// with the gRPC health and reflection services, and HTTP with /json,
// /healthz, /readyz, /metrics, /rules and the live dashboard. Make one with
// [New], then [Run] it.
type Server struct {
	opts Options
	log  *slog.Logger

	svc      *rls.Service
	metrics  *Metrics
	registry *prometheus.Registry
	// rlsInfo and rlsHandler are what the RLS handler gives its
	// interceptors (setRLSHandler).
	rlsInfo    *grpc.UnaryServerInfo
	rlsHandler grpc.UnaryHandler

	recorder       *dashboard.Recorder // nil with Options.NoDashboard
	ruleNames      ruleNames           // the dashboard's rule names
	dashDone       <-chan struct{}     // ends the dashboard's event streams
	closeDashboard func()              // closes dashDone, once

	redis     *lazyStore         // nil on memory
	resilient *resilient.Limiter // nil on memory
	mem       *memory.Store      // nil on Redis
	fallback  *memory.Store      // the local fallback on Redis; nil on memory

	xds    *xds.Client  // nil without Options.XDS
	envoy  *envoyStats  // nil without EnvoyMetrics and statsd
	statsd *statsd      // nil without StatsdAddr
	promLn net.Listener // PrometheusAddr's; nil without it
	prom   *http.Server // nil without PrometheusAddr

	tls     *tlsreload.Reloader // nil without TLS
	tracing *tracing.Tracing    // nil without tracing

	health   *health.Server
	guard    *connGuard
	grpc     *grpc.Server
	http     *http.Server
	probe    *http.Server // nil without Options.ProbeAddr
	grpcLn   net.Listener
	httpLn   net.Listener
	probeLn  net.Listener // nil without Options.ProbeAddr
	stopping atomic.Bool
	// healthDone, closed at the shutdown once the health service has sent
	// NOT_SERVING, ends its Watch streams (watchEnds).
	healthDone chan struct{}

	handshakeLogs throttle // of failed TLS handshakes, on both listeners

	reloadMu  sync.Mutex
	watcher   atomic.Pointer[fswatch.Watcher] // the configuration's, while Run runs
	closeOnce sync.Once
	// life ends when the server starts shutting down (or is closed): a
	// reload then in progress is abandoned.
	life    context.Context
	endLife context.CancelFunc
}

// New loads the configuration, opens the store and binds both listen
// addresses, so that every start-up problem (a broken rule file, a bad
// Redis URL or password, a port in use) is its error. A Redis that cannot
// be reached is no error: the store opens in the background, and each
// rule's failure policy answers until then. It serves nothing until
// [Server.Run].
func New(ctx context.Context, opts Options) (srv *Server, err error) {
	s := &Server{opts: withDefaults(opts), log: opts.Logger}
	s.life, s.endLife = context.WithCancel(context.Background())
	if s.log == nil {
		s.log = slog.Default()
		s.opts.Logger = s.log
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var cfg *config.Config // none until the first xDS update
	if s.opts.XDS.ServerURL != "" {
		if err := s.newXDS(); err != nil {
			return nil, err
		}
	} else if cfg, err = s.load(ctx); err != nil {
		return nil, fmt.Errorf("server: loading the configuration: %w", err)
	}
	s.registry = prometheus.NewRegistry()
	limiter, err := s.openStore(ctx)
	if err != nil {
		return nil, err
	}
	var breaker func() string
	if s.resilient != nil {
		breaker = s.resilient.BreakerState
	}
	if s.metrics, err = NewMetrics(s.registry); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	var obs rls.Observer = s.metrics
	if !s.opts.NoDashboard {
		s.newDashboard(breaker)
		obs = observer{metrics: s.metrics, rec: s.recorder}
	}
	if obs, err = s.envoyMetrics(obs); err != nil {
		return nil, err
	}
	var traceHook func(context.Context, *pb.RateLimitRequest, *pb.RateLimitResponse, error)
	if s.opts.Tracing || s.opts.TracerProvider != nil {
		if s.tracing, err = tracing.New(ctx, tracing.Options{Provider: s.opts.TracerProvider, Version: version.Get().Version, Logger: s.log}); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	if s.tracing != nil {
		store := tracing.Memory
		if s.resilient != nil {
			store = tracing.Redis
		}
		limiter = s.tracing.Limiter(limiter, store)
		traceHook = s.tracing.Decided
	}
	s.svc, err = rls.New(rls.Options{
		Limiter:           limiter,
		Shadow:            s.opts.Shadow,
		QuotaMode:         s.opts.QuotaMode,
		DynamicMetadata:   s.opts.DynamicMetadata,
		Counting:          s.opts.Counting,
		Headers:           s.opts.Headers,
		HeaderNames:       s.opts.HeaderNames,
		DefaultAlgorithm:  s.opts.DefaultAlgorithm,
		MaxDescriptors:    s.opts.MaxDescriptors,
		MaxEntries:        s.opts.MaxEntries,
		MaxBytes:          s.opts.MaxBytes,
		Overrides:         s.opts.Overrides,
		MaxOverridePeriod: s.opts.MaxOverridePeriod,
		Observer:          obs,
		NearLimitRatio:    s.opts.NearLimitRatio,
		Trace:             traceHook,
		Logger:            s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.setRLSHandler()
	if cfg != nil {
		s.setConfig(cfg)
	}
	if least := int64(s.opts.MaxMessageBytes) + streamCost + frameCost; s.opts.GRPCMaxPendingBytes < least {
		return nil, fmt.Errorf("%w: GRPCMaxPendingBytes %d leaves no room for a message of MaxMessageBytes (%d): at least %d", ErrOptions, s.opts.GRPCMaxPendingBytes, s.opts.MaxMessageBytes, least)
	}
	if uint64(s.opts.GRPCMaxStreams) > math.MaxUint32 { // positive, after withDefaults
		return nil, fmt.Errorf("%w: GRPCMaxStreams %d is more than HTTP/2 can say (%d)", ErrOptions, s.opts.GRPCMaxStreams, uint32(math.MaxUint32))
	}
	if err := s.setupTLS(); err != nil {
		return nil, err
	}
	ln, err := listen(s.opts.GRPCAddr, s.opts.UnixSocketMode)
	if err != nil {
		return nil, fmt.Errorf("server: gRPC: %w", err)
	}
	s.grpcLn = ln // closed by Close, whatever fails below
	if ln, err = s.grpcTLS(ln); err != nil {
		return nil, err
	}
	s.guard = newConnGuard(s.opts.GRPCMaxConnections, s.opts.GRPCMaxPendingBytes, s.log)
	s.grpcLn = s.guard.listener(ln)
	if err := s.guard.register(s.registry); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if s.httpLn, err = listen(s.opts.HTTPAddr, s.opts.UnixSocketMode); err != nil {
		return nil, fmt.Errorf("server: HTTP: %w", err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlimit_http_connections_refused_total",
		Help: "HTTP connections closed on arrival because --http-max-connections were open.",
	})
	if err := s.registry.Register(refused); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.httpLn = limitConnections(s.httpLn, connBounds{max: s.opts.HTTPMaxConnections, refused: refused, age: s.opts.HTTPMaxConnectionAge})
	if s.httpLn, err = s.httpTLS(s.httpLn); err != nil {
		return nil, err
	}
	if s.opts.ProbeAddr != "" {
		if s.probeLn, err = s.listenProbe(); err != nil {
			return nil, err
		}
	}
	s.health = health.NewServer()
	s.healthDone = make(chan struct{})
	for _, name := range []string{"", rlsService} { // until Run has checked readiness
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	s.grpc = s.newGRPC()
	if s.http, err = s.newHTTP(); err != nil {
		return nil, err
	}
	if s.probeLn != nil {
		s.probe = s.newProbeHTTP()
	}
	return s, nil
}

// listenProbe binds the probe address, its connections capped apart from
// the HTTP address's.
func (s *Server) listenProbe() (net.Listener, error) {
	ln, err := listen(s.opts.ProbeAddr, s.opts.UnixSocketMode)
	if err != nil {
		return nil, fmt.Errorf("server: probes: %w", err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlimit_probe_connections_refused_total",
		Help: "Connections to the probe address closed on arrival because 64 were open.",
	})
	if err := s.registry.Register(refused); err != nil {
		ln.Close()
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	return limitConnections(ln, connBounds{max: probeMaxConnections, refused: refused}), nil
}

func withDefaults(o Options) Options {
	if o.GRPCAddr == "" {
		o.GRPCAddr = DefaultGRPCAddr
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = DefaultHTTPAddr
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.GRPCMaxStreams <= 0 {
		o.GRPCMaxStreams = DefaultGRPCMaxStreams
	}
	if o.GRPCMaxConnections <= 0 {
		o.GRPCMaxConnections = DefaultGRPCMaxConnections
	}
	if o.HTTPMaxConnections <= 0 {
		o.HTTPMaxConnections = DefaultHTTPMaxConnections
	}
	if o.GRPCMaxPendingBytes <= 0 {
		o.GRPCMaxPendingBytes = DefaultGRPCMaxPendingBytes
	}
	if o.GRPCMaxConnectionAge <= 0 {
		o.GRPCMaxConnectionAge = DefaultGRPCMaxConnectionAge
	}
	if o.HTTPMaxConnectionAge <= 0 {
		o.HTTPMaxConnectionAge = DefaultHTTPMaxConnectionAge
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.ReloadDebounce <= 0 {
		o.ReloadDebounce = DefaultReloadDebounce
	}
	if o.UnixSocketMode == 0 {
		o.UnixSocketMode = DefaultUnixSocketMode
	}
	if o.loadConfig == nil {
		o.loadConfig = func(ctx context.Context, l config.Loader, path string) (*config.Config, error) {
			return l.Load(ctx, path)
		}
	}
	return o
}

// memoryOptions returns the memory store's bounds.
func (o *Options) memoryOptions() []memory.Option {
	var opts []memory.Option
	if o.MemoryMaxKeys != 0 {
		opts = append(opts, memory.WithMaxKeys(o.MemoryMaxKeys))
	}
	if o.MemoryMaxBytes != 0 {
		opts = append(opts, memory.WithMaxBytes(o.MemoryMaxBytes))
	}
	return opts
}

// openStore opens the Redis store behind a resilient limiter with the
// live-node registry, or the memory store when no Redis is named.
func (s *Server) openStore(ctx context.Context) (redlimit.Limiter, error) {
	redisURL, err := s.opts.redisURL()
	if err != nil {
		return nil, err
	}
	mem, err := memory.New(s.opts.memoryOptions()...)
	if err != nil {
		return nil, fmt.Errorf("server: memory store: %w", err)
	}
	if redisURL != "" {
		s.fallback = mem
	} else {
		s.mem = mem
	}
	if err := registerMemoryMetrics(s.registry, mem); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if redisURL == "" {
		s.log.Warn("no Redis named (--redis): limits are kept in this process's memory and shared with no other instance")
		return mem, nil
	}
	refundFailures, err := registerRefundMetric(s.registry)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	opts := []redisstore.Option{redisstore.WithRefundErrorHandler(s.refundFailed(refundFailures))}
	if s.opts.RedisPrefix != "" {
		opts = append(opts, redisstore.WithPrefix(s.opts.RedisPrefix))
	}
	s.redis, err = openLazy(ctx, s.log, func(ctx context.Context) (*redisstore.Store, *redisstore.Registry, error) {
		store, err := redisstore.Open(ctx, redisURL, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("server: %w", err)
		}
		nodes, err := store.Register(ctx, redisstore.RegistryOptions{Logger: s.log})
		if err != nil {
			store.Close()
			return nil, nil, fmt.Errorf("server: live-node registry: %w", err)
		}
		s.log.Info("limits kept in Redis", "redis", redisstore.Redacted(redisURL), "node", nodes.ID(), "live_nodes", nodes.Nodes())
		return store, nodes, nil
	})
	if err != nil {
		return nil, err
	}
	collector, err := redlimitprom.New(s.registry, redlimitprom.Options{})
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	deny := 0 // the default size
	if s.opts.NoDenyCache {
		deny = -1
	}
	if s.resilient, err = resilient.New(s.redis, resilient.Options{Timeout: s.opts.Timeout, Nodes: s.redis, Logger: s.log, Fallback: resilient.FallbackOptions{Limiter: mem},
		DenyCache: resilient.DenyCacheOptions{Size: deny, Bytes: s.opts.DenyCacheBytes},
		Observer:  resilientObserver{collector, &breakerLog{log: s.log}}}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	collector.Watch(s.resilient)
	return s.resilient, nil
}

// GRPCAddr returns the address the gRPC server listens on: host:port, or
// unix:PATH.
func (s *Server) GRPCAddr() string { return addrString(s.grpcLn) }

// HTTPAddr returns the address the HTTP server listens on: host:port, or
// unix:PATH.
func (s *Server) HTTPAddr() string { return addrString(s.httpLn) }

// ProbeAddr returns the address the probes are served on (host:port, or
// unix:PATH), or "" without Options.ProbeAddr.
func (s *Server) ProbeAddr() string {
	if s.probeLn == nil {
		return ""
	}
	return addrString(s.probeLn)
}

// Service returns the RLS service the server serves.
func (s *Server) Service() *rls.Service { return s.svc }

// Run serves until ctx is done, then shuts down gracefully: it stops
// accepting connections and reports not ready, lets the requests in flight
// finish (for at most Options.ShutdownTimeout), and closes the store. It
// returns nil after a shutdown asked by ctx, or the error that stopped a
// server. A Server runs once.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	defer func() {
		stopBG()
		bgWG.Wait()
	}()
	if s.opts.ConfigPath != "" {
		done, err := s.watch(bg)
		if err != nil {
			return err
		}
		bgWG.Go(func() { <-done })
	}
	if s.tls != nil {
		done, err := s.tls.Watch(bg)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		bgWG.Go(func() { <-done })
	}
	bgWG.Go(func() { s.watchReadiness(bg) })
	if s.statsd != nil {
		bgWG.Go(func() { s.statsd.run(bg) })
	}
	if s.xds != nil {
		bgWG.Go(func() { s.xds.Run(bg) })
	}

	errc := make(chan error, 4)
	if s.prom != nil {
		go func() {
			if err := s.prom.Serve(s.promLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("server: Prometheus: %w", err)
			}
		}()
	}
	go func() {
		if err := s.grpc.Serve(s.grpcLn); err != nil {
			errc <- fmt.Errorf("server: gRPC: %w", err)
		}
	}()
	go func() {
		if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("server: HTTP: %w", err)
		}
	}()
	if s.probe != nil {
		go func() {
			if err := s.probe.Serve(s.probeLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("server: probes: %w", err)
			}
		}()
	}
	s.log.Info("serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "probes", s.ProbeAddr(), "dashboard", s.recorder != nil,
		"shadow", s.opts.Shadow, "quota_mode", s.opts.QuotaMode, "counting", cmp.Or(s.opts.Counting, config.CountingAuto).String(), "response_headers", s.opts.Headers.String(), "grpc_tls", s.grpcTLSMode(), "http_tls", s.httpTLSMode())

	var err error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
	case err = <-errc:
		s.log.Error("server failed, shutting down", "err", err)
	}
	start := time.Now()
	s.endLife()
	s.shutdown()
	s.log.Debug("servers stopped", "took", time.Since(start))
	return err
}

// shutdown stops the servers, the in-flight requests given up to
// ShutdownTimeout to finish. The probe address closes last, so that
// /readyz answers "shutting down" while the others drain.
func (s *Server) shutdown() {
	s.stopping.Store(true)
	s.health.Shutdown()
	close(s.healthDone)
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if s.prom != nil {
		wg.Go(func() {
			if err := s.prom.Shutdown(ctx); err != nil {
				s.prom.Close()
			}
		})
	}
	wg.Go(func() {
		if err := s.http.Shutdown(ctx); err != nil {
			s.log.Warn("HTTP requests cut off at the shutdown timeout", "err", err)
			s.http.Close()
		}
		s.log.Debug("HTTP server stopped")
	})
	wg.Go(func() {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.log.Warn("gRPC requests cut off at the shutdown timeout")
			s.grpc.Stop()
			<-done
		}
		s.log.Debug("gRPC server stopped")
	})
	wg.Wait()
	if s.probe != nil {
		if err := s.probe.Shutdown(ctx); err != nil {
			s.probe.Close()
		}
	}
}

// Close releases what New made: listeners, the registry, the limiter and the
// store. Run calls it; call it only for a Server that is not run.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.endLife()
		for _, ln := range []net.Listener{s.grpcLn, s.httpLn, s.probeLn, s.promLn} {
			if ln != nil {
				ln.Close()
			}
		}
		if s.resilient != nil {
			s.resilient.Close()
		}
		if s.redis != nil {
			s.redis.Close()
		}
		for _, mem := range []*memory.Store{s.mem, s.fallback} {
			if mem != nil {
				mem.Close()
			}
		}
		if s.tracing != nil {
			ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
			if err := s.tracing.Shutdown(ctx); err != nil {
				s.log.Warn("tracing: spans not exported at the stop", "err", err)
			}
			cancel()
		}
	})
	return nil
}

// ready reports why the server is not ready, or nil: it is ready once a
// configuration is loaded, while it is not shutting down and, when Redis is
// named, while Redis answers PING.
func (s *Server) ready(ctx context.Context) error {
	if s.stopping.Load() {
		return errors.New("shutting down")
	}
	if !s.svc.Ready() {
		return errors.New("no configuration loaded")
	}
	if s.redis != nil {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := s.redis.ready(ctx); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
	}
	return nil
}

// refundFailed returns the handler of a refund after a denial that failed
// for good (redisstore.WithRefundErrorHandler): counted in failures and
// logged, the limits that allowed keeping the cost until their window
// passes.
func (s *Server) refundFailed(failures prometheus.Counter) func(context.Context, []redlimit.Request, error) {
	return func(ctx context.Context, reqs []redlimit.Request, err error) {
		failures.Inc()
		s.log.WarnContext(ctx, "refund after a denial failed: the limits that allowed keep its cost until their window passes", "limits", len(reqs), "err", err)
	}
}
