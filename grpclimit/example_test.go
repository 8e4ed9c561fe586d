package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/backoff"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memory"
)

// A gRPC server whose calls are limited to one an hour per peer: the second
// fails with ResourceExhausted and a RetryInfo. The store's clock stands
// still, so that the output does not depend on when the example runs.
func Example() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	in, err := grpclimit.New(store, grpclimit.Options{},
		grpclimit.Rule{Name: "peer", Limit: redlimit.PerHour(1).SlidingLog(), Key: grpclimit.RemoteIP})
	if err != nil {
		panic(err)
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 2 {
		var md metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		delay, _ := grpclimit.RetryDelay(err)
		fmt.Println(status.Code(err), md.Get("ratelimit"), delay)
	}
	// Output:
	// OK ["peer";r=0;t=3600] 0s
	// ResourceExhausted ["peer";r=0;t=3600] 1h0m0s
}

// A client that waits out ResourceExhausted with a RetryInfo: the server
// allows one call per 100ms, and the client makes 3 in a row.
func ExampleUnaryClientInterceptor() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	in, err := grpclimit.New(store, grpclimit.Options{},
		grpclimit.Rule{Name: "all", Limit: redlimit.Per(1, 100*time.Millisecond).SlidingLog(), Key: grpclimit.Static("all")})
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(backoff.Policy{MaxAttempts: 5, MaxWait: time.Second})))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(resp.GetStatus(), status.Code(err))
	}
	// Output:
	// SERVING OK
	// SERVING OK
	// SERVING OK
}
