package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ErrConfig reports an OTEL_* environment variable redlimit cannot follow;
// the wrapped message names it.
var ErrConfig = errors.New("tracing: invalid configuration")

// scope is the instrumentation scope of the spans.
const scope = "github.com/redlimit/redlimit/service/internal/tracing"

// Options configure [New]. The zero value of each field is its default.
type Options struct {
	// Provider, when not nil, makes the spans, in place of the provider
	// made from the environment; Shutdown leaves it alone. Tests give
	// one that records in memory (the SDK's tracetest).
	Provider trace.TracerProvider
	// Propagator reads the trace context of requests (default: from
	// OTEL_PROPAGATORS, W3C trace context and baggage).
	Propagator propagation.TextMapPropagator
	// Version is the service.version of the resource.
	Version string
	// Logger receives what tracing has to say: its configuration at start,
	// export errors (default slog.Default()).
	Logger *slog.Logger
	// Lookup reads the environment (default os.LookupEnv).
	Lookup func(string) (string, bool)
}

// Tracing makes the spans of the service's decisions. Make one with
// [New]; a nil *Tracing is tracing off.
type Tracing struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// New returns the service's tracing as the environment configures it, or
// nil, nil when the environment turns it off (OTEL_SDK_DISABLED=true,
// OTEL_TRACES_EXPORTER=none). A variable it cannot follow is an error
// wrapping [ErrConfig].
func New(ctx context.Context, o Options) (*Tracing, error) {
	if o.Lookup == nil {
		o.Lookup = os.LookupEnv
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	env := func(name string) string {
		v, _ := o.Lookup(name)
		return strings.TrimSpace(v)
	}
	t := &Tracing{prop: o.Propagator, shutdown: func(context.Context) error { return nil }}
	if t.prop == nil {
		p, err := propagators(env("OTEL_PROPAGATORS"))
		if err != nil {
			return nil, err
		}
		t.prop = p
	}
	if o.Provider != nil {
		t.tracer = o.Provider.Tracer(scope, trace.WithInstrumentationVersion(o.Version))
		return t, nil
	}
	if disabled, _ := strconv.ParseBool(env("OTEL_SDK_DISABLED")); disabled {
		o.Logger.Info("tracing off: OTEL_SDK_DISABLED is true")
		return nil, nil
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		o.Logger.Info("tracing off: OTEL_TRACES_EXPORTER is none")
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER %q: want otlp or none", ErrConfig, exp)
	}
	sampler, samplerName, err := samplerFrom(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter *otlptrace.Exporter
	switch protocol {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q: want http/protobuf or grpc", ErrConfig, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later detectors win: the environment's service name over redlimit's.
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName("redlimit"), semconv.ServiceVersion(o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		exporter.Shutdown(ctx)
		return nil, fmt.Errorf("%w: the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", ErrConfig, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
	setErrorHandler(o.Logger)
	t.tracer = tp.Tracer(scope, trace.WithInstrumentationVersion(o.Version))
	t.shutdown = tp.Shutdown
	name := ""
	for _, kv := range res.Attributes() {
		if kv.Key == semconv.ServiceNameKey {
			name = kv.Value.Emit()
		}
	}
	o.Logger.Info("tracing on: decisions exported over OTLP", "protocol", protocol, "endpoint", endpoint(env, protocol),
		"sampler", samplerName, "service_name", name)
	return t, nil
}

// Shutdown exports the spans still queued, within ctx, and stops the
// exporter. It does nothing on a nil Tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// samplerFrom returns the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, and its description; unset, a parent-based
// trace ID ratio sampler of ratio arg (default 1).
func samplerFrom(name, arg string) (sdktrace.Sampler, string, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", ErrConfig, arg)
		}
		return r, nil
	}
	name = strings.ToLower(name)
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "traceidratio", "parentbased_traceidratio", "":
		r, err := ratio()
		if err != nil {
			return nil, "", err
		}
		s := sdktrace.TraceIDRatioBased(r)
		if name != "traceidratio" {
			name = "parentbased_traceidratio"
			s = sdktrace.ParentBased(s)
		}
		return s, name + "(" + strconv.FormatFloat(r, 'g', -1, 64) + ")", nil
	}
	return nil, "", fmt.Errorf("%w: OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", ErrConfig, name)
}

// propagators returns the propagators OTEL_PROPAGATORS names (default
// tracecontext,baggage).
func propagators(names string) (propagation.TextMapPropagator, error) {
	if names == "" {
		names = "tracecontext,baggage"
	}
	var ps []propagation.TextMapPropagator
	for _, n := range strings.Split(names, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		case "none", "":
		default:
			return nil, fmt.Errorf("%w: OTEL_PROPAGATORS %q: %q is not one redlimit has (tracecontext, baggage, none)", ErrConfig, names, n)
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...), nil
}

// endpoint returns the OTLP endpoint the environment names, for the log,
// or the exporter's default.
func endpoint(env func(string) string, protocol string) string {
	if e := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	if e := env("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		return e
	}
	if protocol == "grpc" {
		return "localhost:4317 (default)"
	}
	return "localhost:4318 (default)"
}

// errorLogEvery is how often at most an error of the OpenTelemetry SDK (an
// export that failed, say) is logged.
const errorLogEvery = time.Minute

// setErrorHandler sends the OpenTelemetry SDK's errors to log, at most one
// line every errorLogEvery. The SDK takes one handler for the process.
func setErrorHandler(log *slog.Logger) {
	var last atomic.Int64
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		l := last.Load()
		if now-l < int64(errorLogEvery) || !last.CompareAndSwap(l, now) {
			return
		}
		log.Warn("tracing: spans not exported (logged at most once a minute)", "err", err)
	}))
}
