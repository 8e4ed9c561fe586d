package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// fuzzRules are the rules of FuzzShouldRateLimit: every algorithm, a
// nested descriptor, a wildcard, a block, an unlimited and a shadow rule.
const fuzzRules = `domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: sliding_window}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: path
    value: /docs/*
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// grpcAllocBound is the most bytes deciding one gRPC message may allocate:
// 512 KiB for the messages it may hold (64 descriptors of 32 entries with
// the default caps), the decisions and the answer, and 8 bytes per byte of
// message for the copies of its strings and unknown fields. Measured: 2 to
// 5 KB for a small request, 223 KB for 64 descriptors of 32 entries (17 KB
// of message), 74 KB for a 70 KB value, under 1 KB for a refusal before
// decoding (120 KB of empty descriptors: 7.9 MB when they were decoded).
func grpcAllocBound(msg int) uint64 { return 512<<10 + 8*uint64(msg) }

func marshal(tb testing.TB, req *pb.RateLimitRequest) []byte {
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzDescriptors returns n descriptors of m entries, each limited on a
// user of its own.
func fuzzDescriptors(n, m int) []*rlpb.RateLimitDescriptor {
	var ds []*rlpb.RateLimitDescriptor
	for i := range n {
		d := &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "many" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)}}}
		for j := 1; j < m; j++ {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
		}
		ds = append(ds, d)
	}
	return ds
}

// FuzzShouldRateLimit decodes any bytes as the gRPC server does a
// ShouldRateLimit message (its codec and handler, without the network) and
// has the service decide them, as a hostile client would: no panic, an
// answer or InvalidArgument (never Internal, Unknown or Unavailable), and
// at most grpcAllocBound bytes allocated.
func FuzzShouldRateLimit(f *testing.F) {
	desc := func(kv ...string) *rlpb.RateLimitDescriptor {
		d := &rlpb.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return d
	}
	with := func(d *rlpb.RateLimitDescriptor, edit func(*rlpb.RateLimitDescriptor)) *rlpb.RateLimitDescriptor {
		edit(d)
		return d
	}
	for _, req := range []*pb.RateLimitRequest{
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1", "path", "/login")}},
		{Domain: "api", HitsAddend: 7, Descriptors: []*rlpb.RateLimitDescriptor{desc("tenant", "acme"), desc("user", "u"), desc("path", "/docs/x")}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "u"), func(d *rlpb.RateLimitDescriptor) {
			d.HitsAddend = wrapperspb.UInt64(redlimit.MaxCost)
		})}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "u"), func(d *rlpb.RateLimitDescriptor) {
			d.HitsAddend = wrapperspb.UInt64(1 << 63)
		})}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "v"), func(d *rlpb.RateLimitDescriptor) {
			d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typepb.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(3)}
		})}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "v"), func(d *rlpb.RateLimitDescriptor) {
			d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1<<32 - 1, Unit: typepb.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(1<<32 - 1)}
		})}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "w"), func(d *rlpb.RateLimitDescriptor) {
			d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit(99)}
		})}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{with(desc("user", "x"), func(d *rlpb.RateLimitDescriptor) { d.IsNegativeHits = true })}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("blocked", "x"), desc("free", "x"), desc("shadow", "x"), desc("nothing", "x")}},
		{Domain: "api", Descriptors: fuzzDescriptors(64, 32)},
		{Domain: "api", Descriptors: fuzzDescriptors(65, 1)},
		{Domain: "api", Descriptors: fuzzDescriptors(1, 33)},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", strings.Repeat("x", 70000))}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("", "x")}},
		{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{{}}},
		{Domain: "", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "x")}},
		{Domain: "nope", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "x")}},
		{Domain: "api"},
		{},
	} {
		f.Add(marshal(f, req))
	}
	for _, raw := range [][]byte{
		{0xff},
		{0x0a, 0x05, 'a', 'p'},
		{0x0a, 0x02, 0xff, 0xfe},
		{0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		[]byte(strings.Repeat("\x12\x00", 60000)),                                                   // 60,000 empty descriptors
		append([]byte(strings.Repeat("\x12\x00", 31449)), 0xff),                                     // empty descriptors, then a fault (found by make fuzz)
		append([]byte("\x0a\x03api\x12\xc0\xa9\x07"), []byte(strings.Repeat("\x0a\x00", 60000))...), // one descriptor of 60,000 empty entries
		append([]byte("\x0a\x03api"), protowire.AppendTag(nil, 99, protowire.BytesType)...),         // an unknown field, cut
		[]byte(strings.Repeat("\x0a\x03api", 20000)),                                                // a domain 20,000 times
	} {
		f.Add(raw)
	}
	dir := f.TempDir()
	writeFile(f, filepath.Join(dir, "rules.yaml"), fuzzRules)
	// Costs as admissions: the debits of the default counting are not
	// recorded yet (rls's TestCounting).
	s, err := New(context.Background(), Options{Counting: config.CountingAdmission, ConfigPath: filepath.Join(dir, "rules.yaml"), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		NoDashboard: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	codec := newServerCodec()
	decide := func(msg []byte) (any, error) {
		dec := func(v any) error { return codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v) }
		return s.shouldRateLimit(s.svc, context.Background(), dec, nil)
	}
	decide(marshal(f, &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "warm")}})) // the store's first key allocates its tables
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > s.opts.MaxMessageBytes {
			t.Skip("larger than the gRPC server takes")
		}
		var resp any
		var err error
		n := allocated(func() { resp, err = decide(msg) })
		if bound := grpcAllocBound(len(msg)); n > bound {
			t.Fatalf("%d bytes allocated for a message of %d, more than %d", n, len(msg), bound)
		}
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%v for % .100x, want an answer or InvalidArgument", err, msg)
			}
			return
		}
		r, ok := resp.(*pb.RateLimitResponse)
		if !ok || r.OverallCode != pb.RateLimitResponse_OK && r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("answer %v", resp)
		}
	})
}
