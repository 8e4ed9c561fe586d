package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit/internal/redistest"
)

// The trace context the tests' requests carry, as a proxy that traces
// sends it.
const (
	testTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParentSpan = "00f067aa0ba902b7"
)

func traceparent(sampled bool) string {
	flags := "00"
	if sampled {
		flags = "01"
	}
	return "00-" + testTraceID + "-" + testParentSpan + "-" + flags
}

const rlsSpanName = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// traced runs a server whose spans an in-memory exporter records, sampled
// as redlimit samples by default: parent-based, a request without a trace
// context traced.
func traced(t *testing.T, o Options) (*running, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	o.TracerProvider = tp
	return start(t, o), exp
}

// spansNamed returns the spans of that name, waiting until there are n.
func spansNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	waitFor(t, fmt.Sprintf("%d spans %q", n, name), func() bool {
		got = got[:0]
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == name {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("%d spans %q, want %d", len(got), name, n)
	}
	return got
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkAttrs fails unless span has each attribute of want, written as
// key=value.
func checkAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want ...string) {
	t.Helper()
	got := attrs(span)
	for _, w := range want {
		k, v, _ := strings.Cut(w, "=")
		if g, ok := got[attribute.Key(k)]; !ok || g.Emit() != v {
			t.Errorf("span %s: %s = %q, want %q (all: %v)", span.Name(), k, g.Emit(), v, span.Attributes())
		}
	}
}

// checkChildOfRequest fails unless span is the child of the test's remote
// parent.
func checkChildOfRequest(t *testing.T, span sdktrace.ReadOnlySpan) {
	t.Helper()
	p := span.Parent()
	if p.TraceID().String() != testTraceID || p.SpanID().String() != testParentSpan || !p.IsRemote() {
		t.Errorf("span %s: parent %s/%s remote %v, want the request's %s/%s", span.Name(), p.TraceID(), p.SpanID(), p.IsRemote(), testTraceID, testParentSpan)
	}
	if span.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %s: kind %s, want server", span.Name(), span.SpanKind())
	}
}

// noClientData fails if an attribute of any span holds value.
func noClientData(t *testing.T, exp *tracetest.InMemoryExporter, value string) {
	t.Helper()
	for _, s := range exp.GetSpans().Snapshots() {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), value) {
				t.Errorf("span %s records %s = %q, a descriptor's value", s.Name(), kv.Key, kv.Value.Emit())
			}
		}
	}
}

// TestTracing: a ShouldRateLimit call and a POST /json are each a server
// span, the child of the request's traceparent, with the decision's
// domain, descriptor count, overall code and source; the limiter call is
// their child; descriptor values are recorded nowhere; a request whose
// parent is not sampled, the health service and the other routes make no
// span.
func TestTracing(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "web.yaml")
	writeFile(t, cfg, fmt.Sprintf(ruleFile, 1))
	r, exp := traced(t, Options{ConfigPath: cfg})
	const ip = "192.0.2.77"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent(true))
	req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: ip}}}}}
	for _, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := r.client.ShouldRateLimit(ctx, req)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("ShouldRateLimit: %v, %v; want %s", resp, err, want)
		}
	}
	rpcs := spansNamed(t, exp, rlsSpanName, 2)
	calls := spansNamed(t, exp, "redlimit.AllowAll", 2)
	for i, code := range []string{"OK", "OVER_LIMIT"} {
		s := rpcs[i]
		checkChildOfRequest(t, s)
		checkAttrs(t, s, "redlimit.domain=web", "redlimit.descriptors=1", "redlimit.overall_code="+code,
			"redlimit.source=store", "rpc.system=grpc", "rpc.method=ShouldRateLimit", "rpc.grpc.status_code=0")
		c := calls[i]
		if c.Parent().SpanID() != s.SpanContext().SpanID() || c.SpanContext().TraceID().String() != testTraceID {
			t.Errorf("limiter span %d: parent %s, trace %s; want the request's span %s", i, c.Parent().SpanID(), c.SpanContext().TraceID(), s.SpanContext().SpanID())
		}
		checkAttrs(t, c, "redlimit.limits=1", fmt.Sprintf("redlimit.allowed=%v", code == "OK"), "redlimit.source=store")
		if c.SpanKind() != trace.SpanKindInternal {
			t.Errorf("limiter span on memory: kind %s, want internal", c.SpanKind())
		}
	}

	// POST /json, the trace context in its headers.
	body := []byte(`{"domain":"web","descriptors":[{"entries":[{"key":"ip","value":"` + ip + `"}]}]}`)
	hreq, err := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr()+"/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("traceparent", traceparent(true))
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("POST /json: %d, want 429", hresp.StatusCode)
	}
	js := spansNamed(t, exp, "POST /json", 1)[0]
	checkChildOfRequest(t, js)
	checkAttrs(t, js, "redlimit.domain=web", "redlimit.overall_code=OVER_LIMIT", "redlimit.source=store",
		"http.request.method=POST", "http.route=/json", "http.response.status_code=429")
	spansNamed(t, exp, "redlimit.AllowAll", 3)

	// A request refused: its class, not its message; not the server's fault.
	_, err = r.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "web"})
	if err == nil {
		t.Fatal("a request without descriptors was answered")
	}
	bad := spansNamed(t, exp, rlsSpanName, 3)[2]
	checkAttrs(t, bad, "redlimit.error=invalid", "rpc.grpc.status_code=3", "redlimit.source=none")
	if bad.Status().Code == codes.Error {
		t.Errorf("an invalid request marked the span as failed: %v", bad.Status())
	}
	// An unknown domain: no limiter call.
	if _, err := r.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "elsewhere", Descriptors: req.Descriptors}); err != nil {
		t.Fatal(err)
	}
	checkAttrs(t, spansNamed(t, exp, rlsSpanName, 4)[3], "redlimit.source=none", "redlimit.overall_code=OK")

	// A parent that is not sampled: no span. Health checks and the other
	// routes: none either.
	n := len(exp.GetSpans())
	unsampled := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent(false))
	if _, err := r.client.ShouldRateLimit(unsampled, req); err != nil {
		t.Fatal(err)
	}
	if _, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	r.get(t, "/readyz")
	r.get(t, "/metrics")
	time.Sleep(50 * time.Millisecond)
	if got := len(exp.GetSpans()); got != n {
		for _, s := range exp.GetSpans()[n:] {
			t.Errorf("unexpected span %q", s.Name)
		}
	}
	// A request without a trace context: a root span.
	if _, err := r.client.ShouldRateLimit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	root := spansNamed(t, exp, rlsSpanName, 5)[4]
	if root.Parent().IsValid() {
		t.Errorf("a request without traceparent: parent %v, want a root span", root.Parent())
	}
	noClientData(t, exp, ip)
}

// TestTracingRedis: on Redis the limiter call is a client span of
// db.system.name redis, the child of the request's.
func TestTracingRedis(t *testing.T) {
	t.Parallel()
	redis := redistest.Shared(t)
	cfg := filepath.Join(t.TempDir(), "web.yaml")
	writeFile(t, cfg, fmt.Sprintf(ruleFile, 100))
	r, exp := traced(t, Options{ConfigPath: cfg, RedisURL: "redis://" + redis.Addr(),
		RedisPrefix: fmt.Sprintf("tracing%d:", time.Now().UnixNano()), Timeout: 5 * time.Second})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", traceparent(true))
	resp, err := r.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: "198.51.100.1"}}}}})
	if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("%v, %v", resp, err)
	}
	s := spansNamed(t, exp, rlsSpanName, 1)[0]
	checkChildOfRequest(t, s)
	checkAttrs(t, s, "redlimit.source=store", "redlimit.overall_code=OK")
	c := spansNamed(t, exp, "redlimit.AllowAll", 1)[0]
	if c.SpanKind() != trace.SpanKindClient || c.Parent().SpanID() != s.SpanContext().SpanID() {
		t.Errorf("Redis call span: kind %s, parent %s; want client, %s", c.SpanKind(), c.Parent().SpanID(), s.SpanContext().SpanID())
	}
	checkAttrs(t, c, "db.system.name=redis", "redlimit.allowed=true", "redlimit.source=store")
	noClientData(t, exp, "198.51.100.1")
}
