package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
)

// largestRules limit descriptors of 32 entries e0..e31, and of one entry
// user, each on a sliding log of MaxLogCount an hour: every descriptor of
// the largest requests below makes a state of its own.
func largestRules() string {
	var b strings.Builder
	b.WriteString("domain: api\ndescriptors:\n")
	for i := range 32 {
		ind := strings.Repeat("    ", i)
		fmt.Fprintf(&b, "%s  - key: e%d\n", ind, i)
		if i < 31 {
			fmt.Fprintf(&b, "%s    descriptors:\n", ind)
		}
	}
	fmt.Fprintf(&b, "%s    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: sliding_log}\n", strings.Repeat("    ", 31), redlimit.MaxLogCount)
	fmt.Fprintf(&b, "  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: sliding_log}\n", redlimit.MaxLogCount)
	return b.String()
}

// Shapes of the requests of BenchmarkLargestRequest.
const (
	shape64x32 = iota // the largest request the default caps accept
	shapeLong         // one descriptor whose value takes the 64 KiB
	shapeSmall        // an ordinary request, for comparison
)

// largestRequest returns a request of the given shape with values of its
// own for n. shape64x32 is 64 descriptors of 32 entries whose domain,
// keys and values hold 65,530 bytes (the cap is 65,536), each asking for
// MaxLogCount units; shapeLong one descriptor of one entry whose value
// takes the whole 64 KiB, asking for as many; shapeSmall one descriptor
// of one entry with a short value, asking for one.
func largestRequest(n int, shape int) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: "api", HitsAddend: redlimit.MaxLogCount}
	if shape == shapeSmall {
		req.HitsAddend = 0
		req.Descriptors = []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprintf("u%08d", n)}}}}
		return req
	}
	if shape == shapeLong {
		v := fmt.Sprintf("%08d", n)
		v += strings.Repeat("x", DefaultMaxBytesForBench-len("api")-len("user")-len(v))
		req.Descriptors = []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: v}}}}
		return req
	}
	for d := range redlimit.MaxRequests {
		desc := &rlpb.RateLimitDescriptor{}
		for e := range 32 {
			v := fmt.Sprintf("%08d-%02d-%02d-", n, d, e)
			v += strings.Repeat("x", 29-len(v))
			desc.Entries = append(desc.Entries, &rlpb.RateLimitDescriptor_Entry{Key: fmt.Sprintf("e%d", e), Value: v})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

// DefaultMaxBytesForBench is rls.DefaultMaxBytes, the cap on a request's
// domain, keys and values.
const DefaultMaxBytesForBench = 64 << 10

// BenchmarkLargestRequest measures what the largest requests the default
// caps accept cost the service, for docs/SECURITY.md: B/op is what one
// request allocates (decoding, deciding, answering), held-B/request what
// the process keeps after a garbage collection (the store's states, and
// on Redis what the resilient limiter remembers), and cpu-ns/request the
// process's CPU time per request (garbage collection included). Every
// request makes new keys.
//
//   - json/small and grpc/small: an ordinary request of one descriptor,
//     for comparison;
//   - json/64x32 and grpc/64x32: 64 descriptors of 32 entries with 64 KiB
//     of keys and values, through POST /json (the HTTP handler, with its
//     host and cross-origin checks) and the gRPC codec and handler
//     (without the network), on the memory store;
//   - json/64x32_redis: the same on Redis;
//   - json/one_64KiB_value_redis: one descriptor whose value is 64 KiB,
//     on Redis.
func BenchmarkLargestRequest(b *testing.B) {
	dir := b.TempDir()
	writeFile(b, filepath.Join(dir, "rules.yaml"), largestRules())
	open := func(b *testing.B, redis bool) *Server {
		o := Options{ConfigPath: filepath.Join(dir, "rules.yaml"), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Logger: slog.New(slog.DiscardHandler)}
		if redis {
			o.RedisURL = "redis://" + redistest.Shared(b).Addr()
			o.RedisPrefix = fmt.Sprintf("largest%d:", time.Now().UnixNano())
		}
		s, err := New(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	jsonCase := func(name string, redis bool, shape int) {
		b.Run(name, func(b *testing.B) {
			s := open(b, redis)
			bodies := make([][]byte, b.N+1)
			for i := range bodies {
				body, err := protojson.Marshal(largestRequest(i, shape))
				if err != nil {
					b.Fatal(err)
				}
				bodies[i] = body
			}
			if len(bodies[0]) > DefaultMaxMessageBytes {
				b.Fatalf("a body of %d bytes", len(bodies[0]))
			}
			call := func(body []byte) {
				req := httptest.NewRequest("POST", "/json", bytes.NewReader(body))
				req.Host = "127.0.0.1:8080"
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				s.http.Handler.ServeHTTP(rec, req)
				var resp pb.RateLimitResponse
				if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); rec.Code != http.StatusOK || err != nil || resp.Statuses[0].CurrentLimit == nil {
					b.Fatalf("%d, %v: %.300s", rec.Code, err, rec.Body)
				}
			}
			call(bodies[b.N]) // the store's first keys allocate its tables
			heap, cpu := startServerMeasure(b)
			for i := range b.N {
				call(bodies[i])
			}
			stopServerMeasure(b, heap, cpu)
			b.ReportMetric(float64(len(bodies[0])), "body-B")
			runtime.KeepAlive(bodies) // held-B counts what the process keeps, not the bodies
			checkStates(b, s, len(largestRequest(0, shape).Descriptors))
		})
	}
	grpcCase := func(name string, shape int) {
		b.Run(name, func(b *testing.B) {
			s := open(b, false)
			msgs := make([][]byte, b.N+1)
			for i := range msgs {
				msgs[i] = marshal(b, largestRequest(i, shape))
			}
			codec := newServerCodec()
			call := func(msg []byte) {
				dec := func(v any) error { return codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v) }
				resp, err := s.shouldRateLimit(s.svc, context.Background(), dec, nil)
				if r, ok := resp.(*pb.RateLimitResponse); err != nil || !ok || r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit == nil {
					b.Fatalf("%v, %v", resp, err)
				}
			}
			call(msgs[b.N])
			heap, cpu := startServerMeasure(b)
			for i := range b.N {
				call(msgs[i])
			}
			stopServerMeasure(b, heap, cpu)
			b.ReportMetric(float64(len(msgs[0])), "message-B")
			runtime.KeepAlive(msgs)
			checkStates(b, s, len(largestRequest(0, shape).Descriptors))
		})
	}
	jsonCase("json/small", false, shapeSmall)
	grpcCase("grpc/small", shapeSmall)
	jsonCase("json/64x32", false, shape64x32)
	grpcCase("grpc/64x32", shape64x32)
	jsonCase("json/64x32_redis", true, shape64x32)
	jsonCase("json/one_64KiB_value_redis", true, shapeLong)
}

// checkStates checks that each of the descriptors of every request made a
// state of its own in the memory store.
func checkStates(b *testing.B, s *Server, descriptors int) {
	if s.mem == nil {
		return
	}
	if st := s.mem.Stats(); st.States != int64(descriptors*(b.N+1)) {
		b.Fatalf("%+v after %d requests", st, b.N+1)
	}
}

// startServerMeasure collects garbage and starts the timer; it returns the
// live heap and the process's CPU time.
func startServerMeasure(b *testing.B) (uint64, time.Duration) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportAllocs()
	b.ResetTimer()
	return m.HeapAlloc, processCPU()
}

// stopServerMeasure stops the timer and reports the CPU time and the heap
// kept per request since startServerMeasure.
func stopServerMeasure(b *testing.B, heap0 uint64, cpu0 time.Duration) {
	b.StopTimer()
	if cpu := processCPU(); cpu > 0 {
		b.ReportMetric(float64(cpu-cpu0)/float64(b.N), "cpu-ns/request")
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportMetric((float64(m.HeapAlloc)-float64(heap0))/float64(b.N), "held-B/request")
}
