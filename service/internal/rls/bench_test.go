package rls

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/service/internal/config"
)

// benchRules are the rules of cmd/redlimit's BenchmarkRLS: limits far
// above what the benchmark sends, so every decision is an allowed one.
const benchRules = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 100000000
  - key: route
    rate_limit:
      unit: minute
      requests_per_unit: 100000000
      algorithm: fixed_window
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 10000000
      algorithm: token_bucket
`

// BenchmarkDecide measures the service's own work on a request (validate,
// match, plan, the limiter call, the response and the metrics hooks) on
// the memory store, without gRPC or Redis: one and three descriptors,
// 10,000 keys, in parallel.
//
//	go test -run '^$' -bench BenchmarkDecide -benchmem ./service/internal/rls
func BenchmarkDecide(b *testing.B) {
	dom, err := config.Parse("bench.yaml", []byte(benchRules))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			store, err := memory.New()
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			// No header fields, as redlimit serve runs by default.
			svc, err := New(Options{Limiter: store, Headers: ratelimitfield.None})
			if err != nil {
				b.Fatal(err)
			}
			svc.SetConfig(mustConfig(b, dom))
			const nkeys = 10_000
			reqs := make([]*pb.RateLimitRequest, nkeys)
			for i := range reqs {
				r := &pb.RateLimitRequest{Domain: "bench"}
				for _, k := range []string{"user", "route", "tenant"}[:n] {
					r.Descriptors = append(r.Descriptors, &rlpb.RateLimitDescriptor{
						Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: strconv.Itoa(i)}}})
				}
				reqs[i] = r
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				i := 0
				for p.Next() {
					i = (i + 7919) % nkeys
					resp, err := svc.ShouldRateLimit(ctx, reqs[i])
					if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
						b.Errorf("%v, %v", resp, err)
						return
					}
				}
			})
		})
	}
}

// planSink keeps TestDecideAllocs's plans on the heap, as a request's are.
var planSink *plan

// A request of up to three descriptors has its plan in one allocation
// (newPlanOf), not one for the plan and one for each of its slices. Not
// parallel: allocations are counted process-wide.
func TestDecideAllocs(t *testing.T) {
	for n := range 5 {
		want := 1.0
		if n > 3 {
			want = 4
		}
		got := testing.AllocsPerRun(100, func() {
			planSink = newPlanOf(n)
			for i := range n {
				it := item{desc: i}
				planSink.add(&it)
				planSink.items = append(planSink.items, it)
			}
		})
		if got != want {
			t.Errorf("a plan of %d descriptors: %v allocations, want %v", n, got, want)
		}
	}
}
