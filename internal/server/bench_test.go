package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/redlimit/redlimit/internal/redistest"
)

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

// BenchmarkServer is cmd/redlimit's BenchmarkRLS with the server in the
// benchmark's process, so that -cpuprofile sees the server (and the
// clients): 64 clients, one gRPC connection each, 10,000 keys, one local
// redis-server.
//
//	go test -run '^$' -bench BenchmarkServer -benchtime 5s -cpuprofile cpu.out ./internal/server
func BenchmarkServer(b *testing.B) {
	for _, store := range []string{"redis", "memory"} {
		for _, n := range []int{1, 3} {
			for _, conns := range []int{64, 8} {
				b.Run(fmt.Sprintf("%s/descriptors=%d/conns=%d", store, n, conns), func(b *testing.B) {
					path := filepath.Join(b.TempDir(), "bench.yaml")
					writeFile(b, path, benchRules)
					o := Options{ConfigPath: path, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}
					if store == "redis" {
						o.RedisURL = "redis://" + redistest.Shared(b).Addr()
						o.RedisPrefix = fmt.Sprintf("bench%d:", time.Now().UnixNano())
					}
					srv, err := New(context.Background(), o)
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- srv.Run(ctx) }()
					defer func() { cancel(); <-done }()
					load(b, srv.GRPCAddr(), n, 64, conns)
				})
			}
		}
	}
}

// load runs clients concurrent callers over nconns connections.
func load(b *testing.B, addr string, descriptors, clients, nconns int) {
	keys := []string{"user", "route", "tenant"}[:descriptors]
	const nkeys = 10_000
	reqs := make([]*pb.RateLimitRequest, nkeys)
	for i := range reqs {
		r := &pb.RateLimitRequest{Domain: "bench"}
		for _, k := range keys {
			r.Descriptors = append(r.Descriptors, &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: strconv.Itoa(i)}}})
		}
		reqs[i] = r
	}
	conns := make([]pb.RateLimitServiceClient, nconns)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = pb.NewRateLimitServiceClient(c)
		if _, err := conns[i].ShouldRateLimit(context.Background(), reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, clients)
	var next, denied atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			l := make([]time.Duration, 0, b.N/clients+1)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					break
				}
				t0 := time.Now()
				resp, err := conns[c%nconns].ShouldRateLimit(context.Background(), reqs[(int(i)*7919+c)%nkeys])
				l = append(l, time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
				if resp.OverallCode != pb.RateLimitResponse_OK {
					denied.Add(1)
				}
			}
			lat[c] = l
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if denied.Load() > 0 {
		b.Fatalf("%d denied", denied.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
