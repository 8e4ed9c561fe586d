package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/dashboard"
	"github.com/redlimit/redlimit/internal/rls"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// Defaults of [Options].
const (
	DefaultGRPCAddr        = "127.0.0.1:8081"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultMaxMessageBytes = 1 << 20
	DefaultShutdownTimeout = 10 * time.Second
	DefaultReloadDebounce  = 100 * time.Millisecond
)

// Options configure a [Server]. The zero value of each field is its default.
type Options struct {
	// ConfigPath is the rule file, or a directory of *.yaml and *.yml rule
	// files. Empty: no rules (every request is allowed), logged as a warning.
	ConfigPath string
	// RedisURL names the Redis that keeps the limits (see redisstore.Open).
	// Empty: an in-memory store, not shared with any other instance.
	RedisURL string
	// RedisPrefix starts every Redis key (default redisstore.DefaultPrefix).
	// Instances that share limits must share it.
	RedisPrefix string
	// Timeout bounds each Redis call (default resilient.DefaultTimeout);
	// past it the rules' failure policies answer.
	Timeout time.Duration
	// GRPCAddr and HTTPAddr are the listen addresses (default
	// [DefaultGRPCAddr] and [DefaultHTTPAddr]); port 0 picks a free port.
	GRPCAddr, HTTPAddr string
	// Shadow puts every rule in shadow mode.
	Shadow bool
	// Headers selects the response header fields (default none).
	Headers rls.Headers
	// MaxDescriptors, MaxEntries and MaxBytes cap one request (defaults in
	// package rls).
	MaxDescriptors, MaxEntries, MaxBytes int
	// MaxMessageBytes caps a gRPC message and a /json body (default
	// [DefaultMaxMessageBytes]).
	MaxMessageBytes int
	// ShutdownTimeout bounds the graceful shutdown (default
	// [DefaultShutdownTimeout]); requests still running then are cut off.
	ShutdownTimeout time.Duration
	// ReloadDebounce is how long the config path must stay quiet after a
	// change before it is reloaded (default [DefaultReloadDebounce]).
	ReloadDebounce time.Duration
	// NoDashboard turns off the live dashboard, which is otherwise served
	// at / on the HTTP address (see package dashboard): decisions per
	// second, the most limited keys, backend latency and errors, the
	// breaker, the rules and a form to try a request. It shows keys and
	// rules, so keep the address private, or turn it off.
	NoDashboard bool
	// Pprof serves the runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the HTTP address. Off by default: profiles reveal
	// internals and cost CPU, keep the address private.
	Pprof bool
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
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

	recorder       *dashboard.Recorder // nil with Options.NoDashboard
	dashDone       <-chan struct{}     // ends the dashboard's event streams
	closeDashboard func()              // closes dashDone, once

	redis     *redisstore.Store    // nil on memory
	nodes     *redisstore.Registry // nil on memory
	resilient *resilient.Limiter   // nil on memory
	mem       *memory.Store        // nil on Redis

	health   *health.Server
	grpc     *grpc.Server
	http     *http.Server
	grpcLn   net.Listener
	httpLn   net.Listener
	stopping atomic.Bool

	reloadMu  sync.Mutex
	closeOnce sync.Once
}

// New loads the configuration, opens the store and binds both listen
// addresses, so that every start-up problem (a broken rule file, a Redis
// that does not answer, a port in use) is its error. It serves nothing
// until [Server.Run].
func New(ctx context.Context, opts Options) (srv *Server, err error) {
	s := &Server{opts: withDefaults(opts), log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
		s.opts.Logger = s.log
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	cfg, err := s.load()
	if err != nil {
		return nil, fmt.Errorf("server: loading the configuration: %w", err)
	}
	limiter, err := s.openStore(ctx)
	if err != nil {
		return nil, err
	}
	var breaker func() string
	if s.resilient != nil {
		breaker = s.resilient.BreakerState
	}
	s.registry = prometheus.NewRegistry()
	if s.metrics, err = NewMetrics(s.registry, breaker); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	var obs rls.Observer = s.metrics
	if !s.opts.NoDashboard {
		s.newDashboard(breaker)
		obs = observer{metrics: s.metrics, rec: s.recorder}
	}
	s.svc, err = rls.New(rls.Options{
		Limiter:        limiter,
		Shadow:         s.opts.Shadow,
		Headers:        s.opts.Headers,
		MaxDescriptors: s.opts.MaxDescriptors,
		MaxEntries:     s.opts.MaxEntries,
		MaxBytes:       s.opts.MaxBytes,
		Observer:       obs,
		Logger:         s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.setConfig(cfg)
	if s.grpcLn, err = net.Listen("tcp", s.opts.GRPCAddr); err != nil {
		return nil, fmt.Errorf("server: gRPC: %w", err)
	}
	if s.httpLn, err = net.Listen("tcp", s.opts.HTTPAddr); err != nil {
		return nil, fmt.Errorf("server: HTTP: %w", err)
	}
	s.health = health.NewServer()
	for _, name := range []string{"", rlsService} { // until Run has checked readiness
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	s.grpc = s.newGRPC()
	s.http = s.newHTTP()
	return s, nil
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
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.ReloadDebounce <= 0 {
		o.ReloadDebounce = DefaultReloadDebounce
	}
	return o
}

// openStore opens the Redis store behind a resilient limiter with the
// live-node registry, or the memory store when no Redis is named.
func (s *Server) openStore(ctx context.Context) (redlimit.Limiter, error) {
	if s.opts.RedisURL == "" {
		mem, err := memory.New()
		if err != nil {
			return nil, fmt.Errorf("server: memory store: %w", err)
		}
		s.mem = mem
		s.log.Warn("no Redis named (--redis): limits are kept in this process's memory and shared with no other instance")
		return mem, nil
	}
	var opts []redisstore.Option
	if s.opts.RedisPrefix != "" {
		opts = append(opts, redisstore.WithPrefix(s.opts.RedisPrefix))
	}
	store, err := redisstore.Open(ctx, s.opts.RedisURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.redis = store
	if s.nodes, err = store.Register(ctx, redisstore.RegistryOptions{Logger: s.log}); err != nil {
		return nil, fmt.Errorf("server: live-node registry: %w", err)
	}
	if s.resilient, err = resilient.New(store, resilient.Options{Timeout: s.opts.Timeout, Nodes: s.nodes, Logger: s.log}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.log.Info("limits kept in Redis", "redis", redisstore.Redacted(s.opts.RedisURL), "node", s.nodes.ID(), "live_nodes", s.nodes.Nodes())
	return s.resilient, nil
}

// GRPCAddr returns the address the gRPC server listens on.
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// HTTPAddr returns the address the HTTP server listens on.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

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
		w, err := s.newWatcher()
		if err != nil {
			return err
		}
		bgWG.Go(func() { w.run(bg) })
	}
	bgWG.Go(func() { s.watchReadiness(bg) })

	errc := make(chan error, 2)
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
	s.log.Info("serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "dashboard", s.recorder != nil,
		"shadow", s.opts.Shadow, "response_headers", s.opts.Headers.String())

	var err error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
	case err = <-errc:
		s.log.Error("server failed, shutting down", "err", err)
	}
	start := time.Now()
	s.shutdown()
	s.log.Debug("servers stopped", "took", time.Since(start))
	return err
}

// shutdown stops both servers, the in-flight requests given up to
// ShutdownTimeout to finish.
func (s *Server) shutdown() {
	s.stopping.Store(true)
	s.health.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
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
}

// Close releases what New made: listeners, the registry, the limiter and the
// store. Run calls it; call it only for a Server that is not run.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		for _, ln := range []net.Listener{s.grpcLn, s.httpLn} {
			if ln != nil {
				ln.Close()
			}
		}
		if s.nodes != nil {
			s.nodes.Close()
		}
		if s.resilient != nil {
			s.resilient.Close()
		}
		if s.redis != nil {
			s.redis.Close()
		}
		if s.mem != nil {
			s.mem.Close()
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
		if err := s.redis.Ping(ctx); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
	}
	return nil
}
