package tracing

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestNewFromEnvironment: the OTEL_* variables turn tracing off, choose the
// exporter's protocol, the sampler and the propagators; a value redlimit
// does not know is an error naming the variable.
func TestNewFromEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		off  bool
		err  string // "" for no error
		desc string
	}{
		{desc: "defaults", env: map[string]string{}},
		{desc: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}},
		{desc: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}},
		{desc: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, off: true},
		{desc: "disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "zipkin"}, off: true},
		{desc: "exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, err: "OTEL_TRACES_EXPORTER"},
		{desc: "protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTLP protocol"},
		{desc: "sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER"},
		{desc: "ratio", env: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{desc: "ratio text", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{desc: "propagator", env: map[string]string{"OTEL_PROPAGATORS": "tracecontext,b3"}, err: "OTEL_PROPAGATORS"},
	} {
		tr, err := New(context.Background(), Options{Lookup: lookup(tc.env), Logger: quiet()})
		switch {
		case tc.err != "":
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v; want ErrConfig naming %s", tc.desc, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.desc, err)
		case (tr == nil) != tc.off:
			t.Errorf("%s: tracing %v, want off %v", tc.desc, tr, tc.off)
		}
		if tr != nil {
			tr.Shutdown(context.Background())
		}
	}
}

// TestSampler: unset, the sampler follows the parent's decision and samples
// roots at OTEL_TRACES_SAMPLER_ARG's ratio.
func TestSampler(t *testing.T) {
	t.Parallel()
	parent := func(sampled bool) trace.SpanContext {
		var f trace.TraceFlags
		if sampled {
			f = trace.FlagsSampled
		}
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: f, Remote: true})
	}
	decide := func(s sdktrace.Sampler, p trace.SpanContext) bool {
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), p)
		return s.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: trace.TraceID{0xff, 0xff}}).Decision == sdktrace.RecordAndSample
	}
	s, name, err := samplerFrom("", "0")
	if err != nil || name != "parentbased_traceidratio(0)" {
		t.Fatalf("%s, %v", name, err)
	}
	if !decide(s, parent(true)) || decide(s, parent(false)) || decide(s, trace.SpanContext{}) {
		t.Error("ratio 0: want a sampled parent followed, an unsampled one and roots not sampled")
	}
	s, _, _ = samplerFrom("", "")
	if !decide(s, trace.SpanContext{}) {
		t.Error("the default ratio is 1: a root is sampled")
	}
	s, _, _ = samplerFrom("always_off", "")
	if decide(s, parent(true)) {
		t.Error("always_off sampled")
	}
}
