package server

import (
	"context"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// rlsService is the full name of the RLS service, as gRPC health checks
// name it.
const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// Keepalive settings of the gRPC server. Envoy keeps its connections to
// the rate limit service open. Pings every 30 s find dead peers behind
// NATs and load balancers. Clients may ping every 5 s. A connection
// without a request for 5 minutes is closed (GOAWAY); its client
// reconnects when it needs to. Every connection is closed gracefully after
// Options.GRPCMaxConnectionAge, plus or minus 10%. Its requests in flight
// get 10 s. So clients spread again over the instances after a scale-up,
// and no connection holds anything for ever.
const (
	keepaliveTime         = 30 * time.Second
	keepaliveTimeout      = 10 * time.Second
	keepaliveMinTime      = 5 * time.Second
	maxConnectionAgeGrace = 10 * time.Second
)

// maxConnectionIdle is the idle limit above; a variable so that a test can
// see it applied without waiting 5 minutes.
var maxConnectionIdle = 5 * time.Minute

// Flow-control windows. A stream's window is the HTTP/2 default rounded to
// 64 KiB. RLS requests are a few hundred bytes. grpc-go widens the window
// of a stream by its message's length as it reads a larger one. The
// connection's window lets many streams send at once. It bounds nothing:
// grpc-go returns it as it reads the frames.
const (
	streamWindowSize = 64 << 10
	connWindowSize   = 1 << 20
)

// maxHeaderListBytes caps the header fields of one request (decoded, as
// HTTP/2 counts them); grpc-go keeps them for the stream's life. Envoy's
// RLS requests carry a few hundred bytes of them.
const maxHeaderListBytes = 8 << 10

// handshakeTimeout bounds how long a new connection may take to send the
// HTTP/2 preface and settings before the server closes it (a variable, for
// the test that sees it applied).
var handshakeTimeout = 10 * time.Second

// streamWorkers is the number of goroutines that run requests; a request
// that finds them all busy gets a goroutine of its own.
const streamWorkers = 128

// GRPCOptions returns the transport settings of the service's gRPC server
// for the limits in o; each zero field is its default. They are the
// message size cap (MaxMessageBytes) and streams per connection
// (GRPCMaxStreams). They are the header size cap, and the keepalive, idle
// and age limits (GRPCMaxConnectionAge). They are fixed flow-control
// windows and stream workers. The service adds its handlers,
// a panic recovery, and a listener that applies GRPCMaxConnections and
// GRPCMaxPendingBytes. The benchmarks use the same settings to measure
// gRPC on its own.
func GRPCOptions(o Options) []grpc.ServerOption {
	o = withDefaults(o)
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(o.GRPCMaxStreams)),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  keepaliveTime,
			Timeout:               keepaliveTimeout,
			MaxConnectionIdle:     maxConnectionIdle,
			MaxConnectionAge:      o.GRPCMaxConnectionAge,
			MaxConnectionAgeGrace: maxConnectionAgeGrace,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		// Fixed flow-control windows: a fixed window turns off the BDP
		// estimation pings, a write and a read more per request on a busy
		// connection.
		grpc.InitialWindowSize(streamWindowSize),
		grpc.InitialConnWindowSize(connWindowSize),
		// Requests run on a pool of goroutines whose stacks have grown
		// already, instead of a new goroutine each, which grows its stack
		// on every request (about a tenth of the CPU at 64 connections).
		grpc.NumStreamWorkers(streamWorkers),
	}
}

// newGRPC returns the gRPC server. It serves the RLS service, the health
// service and server reflection. A request that does not decode is
// answered InvalidArgument. It has the settings of [GRPCOptions]. With
// tracing on, each ShouldRateLimit has a span. A recovery turns a panic
// into an Internal status instead of a crash.
func (s *Server) newGRPC() *grpc.Server {
	interceptors := []grpc.UnaryServerInterceptor{s.recoverUnary}
	if s.tracing != nil {
		interceptors = []grpc.UnaryServerInterceptor{s.tracing.UnaryInterceptor(), s.recoverUnary}
	}
	g := grpc.NewServer(append(GRPCOptions(s.opts), grpc.ChainUnaryInterceptor(interceptors...), grpc.ChainStreamInterceptor(reflectionEnds(s.healthDone)), grpc.ForceServerCodecV2(newServerCodec()))...)
	g.RegisterService(s.rlsDesc(), s.svc)
	healthpb.RegisterHealthServer(g, watchEnds{Server: s.health, done: s.healthDone})
	reflection.Register(g)
	return g
}

func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in a gRPC handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
	}()
	return h(ctx, req)
}

// watchReadiness keeps the gRPC health status (for "" and the RLS service)
// in step with readiness, checking every second, until ctx is done.
func (s *Server) watchReadiness(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if err := s.ready(ctx); err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
			if st != last {
				s.log.Warn("not ready", "reason", err)
			}
		} else if last == healthpb.HealthCheckResponse_NOT_SERVING {
			s.log.Info("ready again")
		}
		if st != last && !s.stopping.Load() {
			s.health.SetServingStatus("", st)
			s.health.SetServingStatus(rlsService, st)
			last = st
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchEnds is the gRPC health service whose Watch streams end,
// Unavailable, when done is closed. That happens at the shutdown, once
// they have been sent NOT_SERVING. A Watch lasts until its client ends
// it. The graceful stop would otherwise wait for it until the shutdown
// timeout, then cut off every RPC still running.
type watchEnds struct {
	*health.Server
	done <-chan struct{}
}

func (h watchEnds) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(in, &watchStream{Health_WatchServer: stream, ctx: ctx})
	select {
	case <-h.done:
		return status.Error(codes.Unavailable, "the server is shutting down")
	default:
		return err
	}
}

// reflectionEnds returns a stream interceptor that ends the server
// reflection streams (ServerReflectionInfo, v1 and v1alpha), Unavailable,
// when done is closed at the shutdown. Such a stream lasts until its
// client ends it. The graceful stop would otherwise wait for it until the
// shutdown timeout, then cut off every RPC still running. grpc-go's
// reflection handler waits in Recv, which its context's end does not
// interrupt. So the handler runs in a goroutine of its own. The
// interceptor returns without it, which ends the stream and so the Recv.
// The handler's Send is kept from running past that return. Other streams
// pass through.
func reflectionEnds(done <-chan struct{}) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, "/grpc.reflection.v1.ServerReflection/") && !strings.HasPrefix(info.FullMethod, "/grpc.reflection.v1alpha.ServerReflection/") {
			return handler(srv, ss)
		}
		fs := &fencedStream{ServerStream: ss}
		ended := make(chan error, 1)
		go func() { ended <- handler(srv, fs) }()
		select {
		case err := <-ended:
			return err
		case <-done:
			fs.fence()
			return status.Error(codes.Unavailable, "the server is shutting down")
		}
	}
}

// fencedStream is a server stream whose SendMsg fails once fenced; fence
// waits for a SendMsg under way.
type fencedStream struct {
	grpc.ServerStream
	mu     sync.Mutex
	fenced bool
}

func (f *fencedStream) SendMsg(m any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced {
		return status.Error(codes.Unavailable, "the server is shutting down")
	}
	return f.ServerStream.SendMsg(m)
}

func (f *fencedStream) fence() {
	f.mu.Lock()
	f.fenced = true
	f.mu.Unlock()
}

// watchStream is a Watch stream whose context ends at the shutdown. It is
// used by pointer: the health server keys its watchers by stream.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w *watchStream) Context() context.Context { return w.ctx }
