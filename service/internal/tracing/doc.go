// Package tracing traces the service's decisions with OpenTelemetry: a
// span for each ShouldRateLimit call (gRPC) and each POST /json, a child
// span for each call to the limiter (the Redis round trip, or what the
// resilient limiter answered in its place), the trace context taken from
// the request's W3C traceparent (gRPC metadata or HTTP header), exported
// over OTLP.
//
// # Spans
//
// The request's span is a server span named
// "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" (rpc.system,
// rpc.service, rpc.method, rpc.grpc.status_code) or "POST /json"
// (http.request.method, http.route, http.response.status_code), with what
// the decision came to:
//
//	redlimit.domain        the request's domain
//	redlimit.descriptors   how many descriptors it has
//	redlimit.overall_code  OK or OVER_LIMIT
//	redlimit.source        the path that decided: store, deny_cache, local, fail_open,
//	                       fail_closed, undecided (the first that is not the store, over
//	                       the limiter calls), or none when no limiter call was made
//	redlimit.error         invalid, unavailable or error, when the request failed
//
// Each limiter call is a child span "redlimit.AllowAll" or "redlimit.Peek"
// (a client span, db.system.name redis, on Redis) with redlimit.limits (the
// limits asked), redlimit.allowed and redlimit.source. The health and
// reflection services, and the other HTTP routes, are not traced.
//
// The descriptors' entries (their keys and values: client addresses, user
// and tenant names, paths) are never recorded: they are the clients' data,
// and a trace pipeline is not the place to keep them. Nor are error
// messages, only their class. To see which keys are limited, use the
// dashboard or the metrics.
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
// A value redlimit does not know (a sampler, a propagator, an exporter or
// a protocol) is an error at start-up, rather than a silent default.
// Spans are exported in batches off the request path: when the collector
// is slow or gone, the queue fills and spans are dropped, never the
// decisions delayed; export errors are logged, at most one line a minute.
//
// # Cost
//
// Off, nothing is added to a decision: no interceptor, no wrapper, no
// allocation. On, an unsampled request costs the extraction of its trace
// context and a non-recording span; a sampled one, its spans and their
// export (docs/BENCHMARKS.md has the figures).
package tracing
