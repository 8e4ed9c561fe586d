package grpclimit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// testStore is a store the tests run against.
type testStore struct {
	name string
	lim  redlimit.Limiter
}

// testStores returns a memory store and a Redis store with a prefix of this
// test's own, both reading now (or the real clock if now is nil).
func testStores(t *testing.T, now func() time.Time) []testStore {
	t.Helper()
	s := rulesettest.NewStores(t, "grpclimit", now)
	return []testStore{{"memory", s.Memory}, {"redis", s.Redis}}
}

// fixedNow returns a clock that stands still at the current second.
var fixedNow = rulesettest.FixedNow

// newLogger returns a logger of every level and its output.
var newLogger = rulesettest.NewLogger

// countingHealth is the standard health service that counts the calls and
// streams its handlers see.
type countingHealth struct {
	*health.Server
	mu      sync.Mutex
	checks  int
	watches int
}

func (h *countingHealth) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.mu.Lock()
	h.checks++
	h.mu.Unlock()
	return h.Server.Check(ctx, r)
}

func (h *countingHealth) Watch(r *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	h.mu.Lock()
	h.watches++
	h.mu.Unlock()
	return h.Server.Watch(r, s)
}

func (h *countingHealth) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checks, h.watches
}

// serve starts a real gRPC server on 127.0.0.1:0 with the interceptor and a
// health service, and returns a client connected to it with opts.
func serve(t *testing.T, in *grpclimit.Interceptor, opts ...grpc.DialOption) (healthpb.HealthClient, *countingHealth) {
	t.Helper()
	h := &countingHealth{Server: health.NewServer()}
	return serveWith(t, in, h, opts...), h
}

// serveWith starts a real gRPC server on 127.0.0.1:0 with the interceptor
// and hs, and returns a client connected to it with opts.
func serveWith(t *testing.T, in *grpclimit.Interceptor, hs healthpb.HealthServer, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func mustNew(t *testing.T, lim redlimit.Limiter, opts grpclimit.Options, rules ...grpclimit.Rule) *grpclimit.Interceptor {
	t.Helper()
	in, err := grpclimit.New(lim, opts, rules...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
