package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The RLS method, as gRPC names it and as its span is named.
const (
	rlsService = "envoy.service.ratelimit.v3.RateLimitService"
	rlsMethod  = "/" + rlsService + "/ShouldRateLimit"
	rlsSpan    = rlsService + "/ShouldRateLimit"
)

// rpcAttributes are those of every ShouldRateLimit span.
var rpcAttributes = []attribute.KeyValue{
	attribute.String("rpc.system", "grpc"),
	attribute.String("rpc.service", rlsService),
	attribute.String("rpc.method", "ShouldRateLimit"),
}

// UnaryInterceptor returns the gRPC interceptor that makes the span of
// each ShouldRateLimit call, the child of the trace context its metadata
// carries (traceparent); other methods (health, reflection) pass
// untraced.
func (t *Tracing) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod != rlsMethod {
			return h(ctx, req)
		}
		ctx = t.prop.Extract(ctx, metadataCarrier{ctx})
		ctx, span := t.tracer.Start(ctx, rlsSpan, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			return h(ctx, req)
		}
		ctx, _ = withDecision(ctx, span)
		resp, err := h(ctx, req)
		code := status.Code(err)
		span.SetAttributes(rpcAttributes...)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		if serverFault(code) {
			fail(span, err)
		}
		return resp, err
	}
}

// serverFault reports whether a status is the server's failure, as the
// semantic conventions of RPC server spans judge it.
func serverFault(c grpccodes.Code) bool {
	switch c {
	case grpccodes.Unknown, grpccodes.DeadlineExceeded, grpccodes.Unimplemented, grpccodes.Internal,
		grpccodes.Unavailable, grpccodes.DataLoss:
		return true
	}
	return false
}

// metadataCarrier reads the trace context from the incoming metadata,
// one key at a time, without copying the whole of it.
type metadataCarrier struct{ ctx context.Context }

var _ propagation.TextMapCarrier = metadataCarrier{}

func (c metadataCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (metadataCarrier) Set(string, string) {}

func (metadataCarrier) Keys() []string { return nil }

// Handler returns next with a span for each request, named after its
// method and route, the child of the trace context its headers carry.
func (t *Tracing) Handler(route string, next http.Handler) http.Handler {
	post := http.MethodPost + " " + route // the name of almost every span, made once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := post
		if r.Method != http.MethodPost {
			name = r.Method + " " + route
		}
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		ctx, _ = withDecision(ctx, span)
		// Only a sampled request's writer is wrapped, to read its status.
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", sw.code))
		if sw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the writer beneath, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
