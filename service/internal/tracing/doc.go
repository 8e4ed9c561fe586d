// Package tracing traces the service's decisions with OpenTelemetry. Each
// ShouldRateLimit call (gRPC) and each POST /json is a span. Each call to
// the limiter is a child span: the Redis round trip, or what the resilient
// limiter answered in its place. The trace context comes from the
// request's W3C traceparent, in gRPC metadata or an HTTP header. Spans are
// exported over OTLP.
//
// # Spans
//
// The request's span is a server span. Over gRPC it is named
// "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", with
// rpc.system, rpc.service, rpc.method and rpc.grpc.status_code. Over HTTP
// it is "POST /json", with http.request.method, http.route and
// http.response.status_code. It records what the decision came to:
//
//	redlimit.domain        the request's domain
//	redlimit.descriptors   how many descriptors it has
//	redlimit.overall_code  OK or OVER_LIMIT
//	redlimit.source        the path that decided: store, deny_cache, local, fail_open,
//	                       fail_closed, undecided (the first that is not the store, over
//	                       the limiter calls), or none when no limiter call was made
//	redlimit.error         invalid, unavailable or error, when the request failed
//
// Each limiter call is a child span "redlimit.AllowAll" or
// "redlimit.Peek". On Redis it is a client span, with db.system.name
// redis. It has redlimit.limits (the limits asked), redlimit.allowed and
// redlimit.source. The health and reflection services, and the other HTTP
// routes, are not traced.
//
// The descriptors' entries are never recorded. Their keys and values are
// client addresses, user and tenant names, paths: the clients' data. A
// trace pipeline is not the place to keep them. Nor are error messages,
// only their class. To see which keys are limited, use the dashboard or
// the metrics.
//
// # Configuration
//
// Tracing is off unless the server asks for it (--tracing). Then the
// standard environment variables configure it:
//
//	OTEL_SDK_DISABLED=true              tracing off all the same
//	OTEL_TRACES_EXPORTER                otlp (the default) or none (tracing off)
//	OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL http/protobuf (the default, port 4318) or grpc (port 4317)
//	OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE,
//	  _CLIENT_CERTIFICATE, _CLIENT_KEY, _INSECURE   the exporter's, as the OTLP exporters read them
//	OTEL_TRACES_SAMPLER, _ARG           always_on, always_off, traceidratio, parentbased_always_on,
//	                                    parentbased_always_off, parentbased_traceidratio; unset, the
//	                                    sampler is parentbased_traceidratio with OTEL_TRACES_SAMPLER_ARG
//	                                    as its ratio (default 1): a request whose traceparent is
//	                                    sampled is traced, one that is not is not, and one without
//	                                    is traced at the ratio
//	OTEL_PROPAGATORS                    tracecontext and baggage (the default), or none
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES   the resource (service.name redlimit by default)
//	OTEL_BSP_*                          the batch span processor's queue, batch size and delays
//
// A value redlimit does not know is an error at start-up, rather than a
// silent default: a sampler, a propagator, an exporter or a protocol.
// Spans are exported in batches off the request path. When the collector
// is slow or gone, the queue fills and spans are dropped. The decisions
// are never delayed. Export errors are logged, at most one line a minute.
//
// # Cost
//
// Off, nothing is added to a decision: no interceptor, no wrapper, no
// allocation. On, an unsampled request costs the extraction of its trace
// context and a non-recording span. A sampled one costs its spans and
// their export (docs/BENCHMARKS.md has the figures).
package tracing
