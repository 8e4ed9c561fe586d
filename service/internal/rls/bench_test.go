package rls

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
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
				it.req = planSink.add(&it, it.key, it.limit)
				planSink.items = append(planSink.items, it)
			}
		})
		if got != want {
			t.Errorf("a plan of %d descriptors: %v allocations, want %v", n, got, want)
		}
	}
}

// BenchmarkDecideDetailed measures Decide on a detailed_metric rule on the
// memory store, in parallel: held, 50 values that each hold a label;
// flood, a new value at every request, which the rule's slots, once full,
// turn away (the overflow series).
//
//	go test -run '^$' -bench BenchmarkDecideDetailed -benchmem ./service/internal/rls
func BenchmarkDecideDetailed(b *testing.B) {
	dom, err := config.Parse("bench.yaml", []byte(`domain: bench
descriptors:
  - key: user
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 1000000000
`))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"held", "flood"} {
		b.Run(name, func(b *testing.B) {
			store, err := memory.New(memory.WithMaxKeys(100_000))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			svc, err := New(Options{Limiter: store, Headers: ratelimitfield.None})
			if err != nil {
				b.Fatal(err)
			}
			svc.SetConfig(mustConfig(b, dom))
			const nheld = 50
			reqs := make([]*pb.RateLimitRequest, nheld)
			for i := range reqs {
				reqs[i] = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{{
					Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: strconv.Itoa(i)}}}}}
				if _, err := svc.ShouldRateLimit(context.Background(), reqs[i]); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				i := 0
				for p.Next() {
					req := reqs[i%nheld]
					i++
					if name == "flood" {
						req = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{{
							Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "f" + strconv.FormatInt(next.Add(1), 10)}}}}}
					}
					if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDetailedLabel measures finding a detailed_metric label and
// reporting a descriptor under it, without the store: held, 50 values
// that each hold a label; flood, a new value at every call.
//
//	go test -run '^$' -bench BenchmarkDetailedLabel -benchmem ./service/internal/rls
func BenchmarkDetailedLabel(b *testing.B) {
	r := &config.Rule{Path: "bench.user", Domain: "bench", DetailedMetric: true}
	path := []*config.Descriptor{{Key: "user", Rule: r}}
	for _, name := range []string{"held", "flood"} {
		b.Run(name, func(b *testing.B) {
			store, err := memory.New()
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			svc, err := New(Options{Limiter: store})
			if err != nil {
				b.Fatal(err)
			}
			const nheld = 50
			values := make([]string, nheld)
			for i := range values {
				values[i] = strconv.Itoa(i)
				labelAndReport(svc, r, []config.Entry{{Key: "user", Value: values[i]}}, path)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				entries := make([]config.Entry, 1)
				i := 0
				for p.Next() {
					entries[0] = config.Entry{Key: "user", Value: values[i%nheld]}
					i++
					if name == "flood" {
						entries[0].Value = "f" + strconv.FormatInt(next.Add(1), 10)
					}
					labelAndReport(svc, r, entries, path)
				}
			})
		})
	}
}

// labelAndReport finds the label of a descriptor of r and reports it, as
// Decide does.
func labelAndReport(s *Service, r *config.Rule, entries []config.Entry, path []*config.Descriptor) {
	l, sl := s.label(r, entries, path)
	if sl != nil {
		sl.observe(s.opts.Observer, r.Domain, Allowed, redlimit.FromStore, nil)
		return
	}
	s.opts.Observer.Descriptor(r.Domain, l, Allowed, redlimit.FromStore, nil)
}

// fixedLimiter allows every AllowAll at once, with results of its own, and
// allocates nothing: what TestAnswerAllocs counts is the service's.
type fixedLimiter struct {
	redlimit.Limiter
	results []redlimit.Result
}

func (l fixedLimiter) AllowAll(_ context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	return redlimit.Decision{Allowed: true, Results: l.results[:len(reqs)]}, nil
}

// The service's own allocations for a request of BenchmarkRLS (one
// descriptor, or three), besides the limiter's: the response, the
// descriptors' statuses with their limits and resets, the plan and the
// store keys. Not parallel: allocations are counted process-wide.
func TestAnswerAllocs(t *testing.T) {
	dom, err := config.Parse("bench.yaml", []byte(benchRules))
	if err != nil {
		t.Fatal(err)
	}
	results := make([]redlimit.Result, 3)
	for i := range results {
		results[i] = redlimit.Result{Allowed: true, Max: 100, Remaining: 99, ResetAfter: 1500 * time.Millisecond}
	}
	svc, err := New(Options{Limiter: fixedLimiter{results: results}, Headers: ratelimitfield.None})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetConfig(mustConfig(t, dom))
	for n, want := range map[int]float64{1: 5, 3: 7} {
		req := &pb.RateLimitRequest{Domain: "bench"}
		for _, k := range []string{"user", "route", "tenant"}[:n] {
			req.Descriptors = append(req.Descriptors, &rlpb.RateLimitDescriptor{
				Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: "42"}}})
		}
		got := testing.AllocsPerRun(100, func() {
			resp, err := svc.Decide(context.Background(), req)
			if err != nil || len(resp.Statuses) != n || resp.Statuses[n-1].DurationUntilReset.AsDuration() != 1500*time.Millisecond {
				t.Fatalf("%v, %v", resp, err)
			}
		})
		if got > want {
			t.Errorf("%d descriptors: %v allocations, want at most %v", n, got, want)
		}
	}
}
