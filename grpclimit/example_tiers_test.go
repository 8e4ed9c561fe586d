package grpclimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memory"
)

// Tiers: each tenant's plan chooses its limit, in bytes a minute, and each
// call costs the size of its request message. A tenant with no known plan
// gets InvalidArgument, for that call alone.
func ExampleRule_tiers() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	plans := map[string]redlimit.Limit{
		"free": redlimit.PerMinute(100).FixedWindow(),
		"pro":  redlimit.PerMinute(10_000).FixedWindow(),
	}
	tenantPlan := map[string]string{"alice": "free", "bob": "pro"}
	planLimit := func(ctx context.Context, _ string, _ any) (redlimit.Limit, error) {
		md, _ := metadata.FromIncomingContext(ctx) // as authentication found it
		id := strings.Join(md.Get("tenant"), "")
		l, ok := plans[tenantPlan[id]]
		if !ok {
			return redlimit.Limit{}, fmt.Errorf("tenant %q has no known plan", id)
		}
		return l, nil
	}
	size := func(_ context.Context, _ string, req any) (int64, error) {
		if m, ok := req.(proto.Message); ok {
			return max(1, int64(proto.Size(m))), nil
		}
		return 1, nil // a stream is decided before its messages
	}
	in, err := grpclimit.New(store, grpclimit.Options{Logger: slog.New(slog.DiscardHandler)},
		grpclimit.Rule{Name: "plan", Key: grpclimit.Metadata("tenant"), LimitFunc: planLimit, CostFunc: size})
	if err != nil {
		panic(err)
	}

	hs := health.NewServer()
	hs.SetServingStatus(strings.Repeat("s", 58), healthpb.HealthCheckResponse_SERVING)
	client, stop := serveHealth(in, hs)
	defer stop()

	req := &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 58)} // 60 bytes
	for _, tenant := range []string{"alice", "alice", "bob", "carol"} {
		var md metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", tenant)
		_, err := client.Check(ctx, req, grpc.Header(&md))
		fmt.Println(tenant, status.Code(err), md.Get("ratelimit-policy"), md.Get("ratelimit"))
	}
	// Output:
	// alice OK ["plan";q=100;w=60] ["plan";r=40;t=60]
	// alice ResourceExhausted ["plan";q=100;w=60] ["plan";r=40;t=60]
	// bob OK ["plan";q=10000;w=60] ["plan";r=9940;t=60]
	// carol InvalidArgument [] []
}
