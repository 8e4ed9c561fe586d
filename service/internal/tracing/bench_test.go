package tracing

import (
	"context"
	"strconv"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTraced measures what tracing adds to a ShouldRateLimit call on
// the memory store, without gRPC's transport: the interceptor, the
// decision and the limiter wrapper, with the request's traceparent in its
// metadata.
//
//	off        tracing off: the service alone, as `redlimit serve` runs without --tracing
//	unsampled  tracing on, the request's parent not sampled
//	sampled    tracing on, every request sampled, spans batched to an exporter that drops them
//
// go test -run '^$' -bench BenchmarkTraced -benchmem ./service/internal/tracing
func BenchmarkTraced(b *testing.B) {
	dom, err := config.Parse("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100000000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.New(dom)
	if err != nil {
		b.Fatal(err)
	}
	const nkeys = 10_000
	reqs := make([]*pb.RateLimitRequest, nkeys)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: strconv.Itoa(i)}}}}}
	}
	info := &grpc.UnaryServerInfo{FullMethod: rlsMethod}
	for _, mode := range []string{"off", "unsampled", "sampled"} {
		b.Run(mode, func(b *testing.B) {
			store, err := memory.New()
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			o := rls.Options{Limiter: store}
			var intercept grpc.UnaryServerInterceptor
			flags := "01"
			if mode != "off" {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}),
					sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
				defer tp.Shutdown(context.Background())
				tr, err := New(context.Background(), Options{Provider: tp, Propagator: propagation.TraceContext{}})
				if err != nil {
					b.Fatal(err)
				}
				o.Limiter, o.Trace = tr.Limiter(store, Memory), tr.Decided
				intercept = tr.UnaryInterceptor()
				if mode == "unsampled" {
					flags = "00"
				}
			}
			svc, err := rls.New(o)
			if err != nil {
				b.Fatal(err)
			}
			svc.SetConfig(cfg)
			handler := func(ctx context.Context, req any) (any, error) {
				return svc.ShouldRateLimit(ctx, req.(*pb.RateLimitRequest))
			}
			ctx := metadata.NewIncomingContext(context.Background(),
				metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"+flags))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				i := 0
				for p.Next() {
					i = (i + 7919) % nkeys
					var resp any
					var err error
					if intercept == nil {
						resp, err = handler(ctx, reqs[i])
					} else {
						resp, err = intercept(ctx, reqs[i], info, handler)
					}
					if err != nil || resp.(*pb.RateLimitResponse).OverallCode != pb.RateLimitResponse_OK {
						b.Errorf("%v, %v", resp, err)
						return
					}
				}
			})
		})
	}
}
