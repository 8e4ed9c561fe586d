package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memory"
)

// serveHealth serves hs behind in on a loopback port and returns a client.
func serveHealth(in *grpclimit.Interceptor, hs healthpb.HealthServer) (healthpb.HealthClient, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return healthpb.NewHealthClient(conn), func() { conn.Close(); srv.Stop() }
}

// Delay: calls beyond the rate wait their turn instead of failing. Four
// calls at once on a limit of 10 a second are spaced 100ms apart.
func ExampleRule_delay() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	in, err := grpclimit.New(store, grpclimit.Options{},
		grpclimit.Rule{Name: "vendor", Limit: redlimit.Per(10, time.Second).TokenBucket(1),
			Key: grpclimit.Static("vendor"), Delay: time.Second})
	if err != nil {
		panic(err)
	}
	client, stop := serveHealth(in, health.NewServer())
	defer stop()

	start := time.Now()
	var wg sync.WaitGroup
	codes := make([]string, 4)
	for i := range codes {
		wg.Go(func() {
			_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
			codes[i] = status.Code(err).String()
		})
	}
	wg.Wait()
	fmt.Println(codes)
	fmt.Println("spaced at the rate:", time.Since(start) >= 300*time.Millisecond)
	// Output:
	// [OK OK OK OK]
	// spaced at the rate: true
}

// blockingHealth answers Check once release is closed.
type blockingHealth struct {
	healthpb.UnimplementedHealthServer
	running chan struct{}
	release chan struct{}
}

func (b *blockingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	b.running <- struct{}{}
	<-b.release
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// In flight: at most one call of a tenant runs at once, across every
// server sharing the store (a redisstore.Store; here a memory store).
func ExampleRule_inFlight() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	in, err := grpclimit.New(store, grpclimit.Options{},
		grpclimit.Rule{Name: "jobs", InFlight: redlimit.InFlight(1, 30*time.Second), Key: grpclimit.Metadata("x-tenant")})
	if err != nil {
		panic(err)
	}
	hs := &blockingHealth{running: make(chan struct{}), release: make(chan struct{})}
	client, stop := serveHealth(in, hs)
	defer stop()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	first := make(chan error)
	go func() {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		first <- err
	}()
	<-hs.running
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println("second while the first runs:", status.Code(err))
	close(hs.release)
	fmt.Println("the first:", status.Code(<-first))
	go func() { <-hs.running }()
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println("after it returned:", status.Code(err))
	// Output:
	// second while the first runs: ResourceExhausted
	// the first: OK
	// after it returned: OK
}
