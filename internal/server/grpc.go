package server

import (
	"context"
	"runtime/debug"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// rlsService is the full name of the RLS service, as gRPC health checks
// name it.
const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// Keepalive settings of the gRPC server. Envoy keeps its connections to the
// rate limit service open; pings every 30 s find dead peers behind NATs and
// load balancers, and clients may ping every 5 s.
var (
	keepaliveParams = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}
	keepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}
)

// windowSize is the HTTP/2 flow-control window of every stream and
// connection.
const windowSize = 1 << 20

// streamWorkers is the number of goroutines that run requests; a request
// that finds them all busy gets a goroutine of its own.
const streamWorkers = 128

// GRPCOptions returns the transport settings of the service's gRPC server:
// the message size cap, keepalive, fixed flow-control windows and stream
// workers. The service adds its handlers and a panic recovery; the
// benchmarks use the same settings to measure gRPC on its own.
func GRPCOptions(maxMessageBytes int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.KeepaliveParams(keepaliveParams),
		grpc.KeepaliveEnforcementPolicy(keepalivePolicy),
		// Fixed flow-control windows: RLS messages are small, and a fixed
		// window turns off the BDP estimation pings, a write and a read
		// more per request on a busy connection.
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		// Requests run on a pool of goroutines whose stacks have grown
		// already, instead of a new goroutine each, which grows its stack
		// on every request (about a tenth of the CPU at 64 connections).
		grpc.NumStreamWorkers(streamWorkers),
	}
}

// newGRPC returns the gRPC server: the RLS service, the health service and
// server reflection, with the settings of [GRPCOptions] and a recovery that
// turns a panic into an Internal status instead of a crash.
func (s *Server) newGRPC() *grpc.Server {
	g := grpc.NewServer(append(GRPCOptions(s.opts.MaxMessageBytes), grpc.ChainUnaryInterceptor(s.recoverUnary))...)
	pb.RegisterRateLimitServiceServer(g, s.svc)
	healthpb.RegisterHealthServer(g, s.health)
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
