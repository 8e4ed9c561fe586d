package server

import (
	"context"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/redlimit/redlimit/service/internal/rls"
)

// decodeTarget is what the RLS handler decodes a request into. serverCodec
// checks the message against the service's caps (rls.Service.CheckWire)
// before it decodes it. It records an error instead of returning it.
// grpc-go would answer a returned error with Internal, a server error. But
// the client sent the bytes.
type decodeTarget struct {
	svc *rls.Service
	req pb.RateLimitRequest
	err error // malformed
	cap error // over a cap
}

// serverCodec is grpc-go's proto codec, but for a decodeTarget.
type serverCodec struct{ encoding.CodecV2 }

func newServerCodec() serverCodec { return serverCodec{encoding.GetCodecV2(grpcproto.Name)} }

// Unmarshal implements encoding.CodecV2.
func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if t, ok := v.(*decodeTarget); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if t.cap = t.svc.CheckWire(buf.ReadOnlyData()); t.cap == nil {
			t.err = proto.Unmarshal(buf.ReadOnlyData(), &t.req)
		}
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// rlsDesc is the RLS service as the server registers it: the generated
// service, with a handler of ShouldRateLimit that answers a message that
// does not decode InvalidArgument.
func (s *Server) rlsDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: rlsService,
		HandlerType: (*pb.RateLimitServiceServer)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: s.shouldRateLimit}},
		Metadata:    "envoy/service/ratelimit/v3/rls.proto",
	}
}

// shouldRateLimit is the gRPC handler of ShouldRateLimit: it decodes the
// request with dec (which must use serverCodec) and has the service answer
// it through interceptor, if not nil.
func (s *Server) shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	start := time.Now()
	in := &decodeTarget{svc: s.svc}
	if err := dec(in); err != nil {
		return nil, err
	}
	if in.cap != nil {
		s.metrics.Request(rls.AnswerInvalid, time.Since(start))
		return nil, status.Error(codes.InvalidArgument, in.cap.Error())
	}
	if in.err != nil {
		s.metrics.Request(rls.AnswerInvalid, time.Since(start))
		return nil, status.Errorf(codes.InvalidArgument, "malformed RateLimitRequest: %v", in.err)
	}
	if interceptor == nil {
		return s.svc.ShouldRateLimit(ctx, &in.req)
	}
	return interceptor(ctx, &in.req, s.rlsInfo, s.rlsHandler)
}

// setRLSHandler makes the UnaryServerInfo and the handler shouldRateLimit
// gives its interceptor. They are made once, not per request
// (TestShouldRateLimitAllocs).
func (s *Server) setRLSHandler() {
	s.rlsInfo = &grpc.UnaryServerInfo{Server: s.svc, FullMethod: pb.RateLimitService_ShouldRateLimit_FullMethodName}
	s.rlsHandler = func(ctx context.Context, req any) (any, error) {
		return s.svc.ShouldRateLimit(ctx, req.(*pb.RateLimitRequest))
	}
}
