package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// rawCodec sends a []byte as the message, unchanged, so that a test can
// send bytes that are no RateLimitRequest.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// A message that does not decode is the client's error: InvalidArgument
// (grpc-go answers Internal, a server error, by itself), and the service
// keeps serving.
func TestMalformedRequestIsInvalidArgument(t *testing.T) {
	t.Parallel()
	r := start(t, Options{})
	for _, msg := range [][]byte{
		{0xff},                   // a tag of no field number
		{0x0a, 0x05, 'w', 'e'},   // domain: 5 bytes announced, 2 sent
		{0x0a, 0x02, 0xff, 0xfe}, // domain: not UTF-8
		{0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // a length varint too long
		{0x18, 0x80}, // hits_addend: a varint cut short
	} {
		var out []byte
		err := r.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &msg, &out, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed RateLimitRequest") {
			t.Errorf("% x: %v, want InvalidArgument naming a malformed RateLimitRequest", msg, err)
		}
	}
	stillAnswers(t, r)
	if got := r.metric(t, `redlimit_rls_requests_total{answer="invalid"}`); got != 5 {
		t.Errorf(`redlimit_rls_requests_total{answer="invalid"} = %v, want 5`, got)
	}
}

// The RLS handler hands its interceptors (the panic recovery, always; the
// tracing span with --tracing) an info and a handler made once: going
// through an interceptor allocates nothing more than calling the service
// directly. Not parallel: allocations are counted process-wide.
func TestShouldRateLimitAllocs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yaml"), fuzzRules)
	s, err := New(context.Background(), Options{ConfigPath: filepath.Join(dir, "rules.yaml"), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		NoDashboard: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	msg := marshal(t, &pb.RateLimitRequest{Domain: "api", Descriptors: []*rlpb.RateLimitDescriptor{descriptor("path", "/docs/a")}}) // 1000 a day: every call allowed
	codec := newServerCodec()
	dec := func(v any) error { return codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v) }
	call := func(interceptor grpc.UnaryServerInterceptor) {
		resp, err := s.shouldRateLimit(s.svc, context.Background(), dec, interceptor)
		if _, ok := resp.(*pb.RateLimitResponse); err != nil || !ok {
			t.Fatalf("%v, %v", resp, err)
		}
	}
	recovery := grpc.UnaryServerInterceptor(s.recoverUnary) // as newGRPC chains it, once
	direct := testing.AllocsPerRun(200, func() { call(nil) })
	through := testing.AllocsPerRun(200, func() { call(recovery) })
	if through > direct {
		t.Errorf("%v allocations through an interceptor, %v without", through, direct)
	}
}
