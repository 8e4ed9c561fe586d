package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace receiver: it counts the spans it is
// sent and, if asked, keeps them with their resource's service.name.
type collector struct {
	url   string
	keep  bool
	mu    sync.Mutex
	n     int
	spans []*tracepb.Span
	names []string // service.name of each span's resource
}

func newCollector(t testing.TB, keep bool) *collector {
	c := &collector{keep: keep}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			name := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					name = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.n += len(ss.Spans)
				if c.keep {
					for _, s := range ss.Spans {
						c.spans = append(c.spans, s)
						c.names = append(c.names, name)
					}
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// find returns the first span named name and its service name, or nil.
func (c *collector) find(name string) (*tracepb.Span, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.spans {
		if s.Name == name {
			return s, c.names[i]
		}
	}
	return nil, ""
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestServeTracingOTLP runs the binary with --tracing and the standard
// OTEL_* variables: a decision's spans reach the OTLP endpoint named, with
// the service name set, in the request's trace. Without --tracing nothing
// is exported, whatever the environment says.
func TestServeTracingOTLP(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, cfg, tlsRules)
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ask := func(p *proc) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+parentID+"-01")
		resp, err := p.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "tls", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "u7")}})
		if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("ShouldRateLimit: %v, %v", resp, err)
		}
	}
	env := func(c *collector) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.url, "OTEL_SERVICE_NAME=rls-e2e", "OTEL_BSP_SCHEDULE_DELAY=50"}
	}

	off := newCollector(t, true)
	p := startProc(t, env(off), "--config="+cfg)
	ask(p)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if n := off.count(); n != 0 {
		t.Fatalf("without --tracing, %d spans exported", n)
	}

	on := newCollector(t, true)
	p = startProc(t, env(on), "--config="+cfg, "--tracing")
	ask(p)
	var span *tracepb.Span
	var service string
	waitFor(t, "the decision's span exported", func() bool {
		span, service = on.find("envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
		return span != nil
	})
	if hex.EncodeToString(span.TraceId) != traceID || hex.EncodeToString(span.ParentSpanId) != parentID || service != "rls-e2e" {
		t.Errorf("span in trace %x, parent %x, service %q; want %s, %s, rls-e2e", span.TraceId, span.ParentSpanId, service, traceID, parentID)
	}
	waitFor(t, "the limiter call's span exported", func() bool {
		c, _ := on.find("redlimit.AllowAll")
		return c != nil && string(c.ParentSpanId) == string(span.SpanId)
	})
}
