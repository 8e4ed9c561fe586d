package server

import (
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/service/internal/rls"
	"github.com/redlimit/redlimit/service/internal/version"
)

// Metrics are the service's Prometheus metrics, on a registry of its own.
// Metrics implements rls.Observer.
//
//	redlimit_rls_requests_total{answer}                   ok, over_limit, invalid, unavailable, error
//	redlimit_rls_request_duration_seconds                 time to answer a request
//	redlimit_rls_decisions_total{domain,rule,outcome}     per limited descriptor: allowed, denied, shadow_denied, unlimited,
//	                                                      undecided (another limit denied while this one's store failed);
//	                                                      rule is the rule's path, or for detailed_metric the request's
//	                                                      values, within the caps of package rls (256 bytes a label,
//	                                                      100 labels a rule, 1,000 in all, held by the most frequent
//	                                                      values: a label that loses its slot has its series deleted;
//	                                                      values without one are counted under the path)
//	redlimit_rls_decisions_by_source_total{source}        per limited descriptor, the path that decided:
//	                                                      store, deny_cache, local, fail_open, fail_closed, undecided
//	redlimit_backend_duration_seconds                     one call to the limiter (Redis through resilient, or memory)
//	redlimit_backend_errors_total{reason}                 calls that failed (error) or that the failure policies
//	                                                      answered because the store failed or the breaker was open
//	                                                      (local, fail_open, fail_closed)
//	redlimit_config_reloads_total{result}                 success, failure (the first load included)
//	redlimit_config_last_reload_success_timestamp_seconds
//	redlimit_config_rules                                 rules of the configuration in use
//	redlimit_refund_failures_total                        on Redis: refunds after a denial that failed for good
//	redlimit_memory_states, redlimit_memory_bytes         the in-memory store (without Redis; the local fallback with
//	                                                      Redis): states held, their estimated bytes
//	redlimit_memory_refused_total                         new keys it denied because it was full
//	redlimit_tls_reloads_total{result}                    with TLS: loads of the certificate files (the first included)
//	                                                      by result, success or failure (the one in use kept serving)
//	redlimit_tls_certificate_not_after_timestamp_seconds  with TLS: when the certificate in use expires
//	redlimit_tls_handshake_failures_total                 with TLS: handshakes that failed on either address (no client
//	                                                      certificate, one of another CA, a client that does not trust ours...)
//	redlimit_build_info{version,revision,goversion}       1, labelled with the running build (internal/version)
//
// and the Go runtime and process collectors. With Redis, the resilient
// limiter's collector (module github.com/redlimit/redlimit/prometheus,
// which lists them) adds redlimit_breaker_state{state},
// redlimit_breaker_changes_total, redlimit_decisions_total,
// redlimit_store_duration_seconds, redlimit_store_errors_total and
// redlimit_reconcile_*. The backend metrics above time every call to the
// limiter, with or without Redis; the store's, each call to Redis.
//
// With Options.EnvoyMetrics, envoyproxy/ratelimit's series too
// (envoymetrics.go):
//
//	ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}{domain,key1,key2}
//	                                                      hits per rule, as its base limiter counts them; key1 and key2
//	                                                      are the rule label's next parts ("" when it has none)
type Metrics struct {
	requests    *prometheus.CounterVec
	requestTime prometheus.Histogram
	decisions   *prometheus.CounterVec
	bySource    *prometheus.CounterVec
	backendTime prometheus.Histogram
	backendErrs *prometheus.CounterVec
	reloads     *prometheus.CounterVec
	lastReload  prometheus.Gauge
	rules       prometheus.Gauge

	tlsReloads    *prometheus.CounterVec
	tlsNotAfter   *prometheus.GaugeVec // no labels: no series without TLS
	tlsHandshakes *prometheus.CounterVec

	// The series of fixed label values, looked up once rather than by
	// label (a hash and a lock) at every decision.
	answers   map[string]prometheus.Counter
	sources   [redlimit.Undecided + 1]prometheus.Counter      // by redlimit.Source
	errs      prometheus.Counter                              // backendErrs "error"
	policyErr [redlimit.FromFailClosed + 1]prometheus.Counter // backendErrs by failure-policy source; nil for the others
}

var (
	_ rls.Observer     = (*Metrics)(nil)
	_ rls.LabelDropper = (*Metrics)(nil)
)

// latencyBuckets span 50 µs to 1 s.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// NewMetrics registers the service's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_rls_requests_total", Help: "ShouldRateLimit requests (gRPC and /json) by answer.",
		}, []string{"answer"}),
		requestTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "redlimit_rls_request_duration_seconds", Help: "Time the service took to answer a request.", Buckets: latencyBuckets,
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_rls_decisions_total", Help: "Limited descriptors by domain, rule and outcome.",
		}, []string{"domain", "rule", "outcome"}),
		bySource: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_rls_decisions_by_source_total", Help: "Limited descriptors by the path that decided them.",
		}, []string{"source"}),
		backendTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "redlimit_backend_duration_seconds", Help: "Time of one call to the limiter.", Buckets: latencyBuckets,
		}),
		backendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_backend_errors_total", Help: "Limiter calls that failed (error) or were answered by a failure policy (local, fail_open, fail_closed).",
		}, []string{"reason"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_config_reloads_total", Help: "Configuration loads by result.",
		}, []string{"result"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redlimit_config_last_reload_success_timestamp_seconds", Help: "When the configuration in use was loaded.",
		}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "redlimit_config_rules", Help: "Rules of the configuration in use.",
		}),
		tlsReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_tls_reloads_total", Help: "Loads of the TLS certificate files by result; after a failure the certificate in use keeps serving.",
		}, []string{"result"}),
		tlsNotAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "redlimit_tls_certificate_not_after_timestamp_seconds", Help: "When the TLS certificate in use expires.",
		}, nil),
		tlsHandshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_tls_handshake_failures_total", Help: "TLS handshakes that failed, on the gRPC or the HTTP address: a client without a certificate or with one of another CA under mutual TLS, or a client that does not trust the server's.",
		}, nil),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "redlimit_build_info", Help: "1, labelled with the version, commit and Go version of the running build.",
	}, []string{"version", "revision", "goversion"})
	v := version.Get()
	build.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	cs := []prometheus.Collector{build, m.requests, m.requestTime, m.decisions, m.bySource, m.backendTime, m.backendErrs,
		m.reloads, m.lastReload, m.rules, m.tlsReloads, m.tlsNotAfter, m.tlsHandshakes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Make the usual series visible from the start.
	m.answers = map[string]prometheus.Counter{}
	for _, a := range []string{rls.AnswerOK, rls.AnswerOverLimit, rls.AnswerInvalid, rls.AnswerUnavailable, rls.AnswerError} {
		m.answers[a] = m.requests.WithLabelValues(a)
	}
	for src := range m.sources {
		m.sources[src] = m.bySource.WithLabelValues(redlimit.Source(src).String())
	}
	m.errs = m.backendErrs.WithLabelValues("error")
	for _, src := range []redlimit.Source{redlimit.FromLocal, redlimit.FromFailOpen, redlimit.FromFailClosed} {
		m.policyErr[src] = m.backendErrs.WithLabelValues(src.String())
	}
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	return m, nil
}

// Request implements rls.Observer.
func (m *Metrics) Request(answer string, took time.Duration) {
	c, ok := m.answers[answer]
	if !ok {
		c = m.requests.WithLabelValues(answer)
	}
	c.Inc()
	m.requestTime.Observe(took.Seconds())
}

// Descriptor implements rls.Observer. The entries are not used: keys
// would make unbounded label values.
func (m *Metrics) Descriptor(domain, rule string, o rls.Outcome, src redlimit.Source, _ []*rlpb.RateLimitDescriptor_Entry) {
	m.decisions.WithLabelValues(domain, rule, o.String()).Inc()
	if o == rls.Unlimited {
		return
	}
	if int(src) < len(m.sources) {
		m.sources[src].Inc()
	} else {
		m.bySource.WithLabelValues(src.String()).Inc()
	}
}

// DropLabel implements rls.LabelDropper: it deletes the series of a
// detailed_metric label that lost its slot.
func (m *Metrics) DropLabel(domain, rule string) {
	for o := rls.Allowed; o <= rls.Undecided; o++ {
		m.decisions.DeleteLabelValues(domain, rule, o.String())
	}
}

// Backend implements rls.Observer.
func (m *Metrics) Backend(took time.Duration, src redlimit.Source, err error) {
	m.backendTime.Observe(took.Seconds())
	switch {
	case err != nil:
		m.errs.Inc()
	case int(src) < len(m.policyErr) && m.policyErr[src] != nil:
		m.policyErr[src].Inc()
	}
}

// Reloaded counts a configuration load that succeeded, holding rules rules.
func (m *Metrics) Reloaded(rules int) {
	m.reloads.WithLabelValues("success").Inc()
	m.lastReload.SetToCurrentTime()
	m.rules.Set(float64(rules))
}

// ReloadFailed counts a configuration load that failed.
func (m *Metrics) ReloadFailed() { m.reloads.WithLabelValues("failure").Inc() }

// TLSLoaded counts a load of the TLS files: a success, with when the
// certificate expires, or a failure (err not nil). It is the
// tlsreload.Options.Loaded of the server.
func (m *Metrics) TLSLoaded(notAfter time.Time, err error) {
	if err != nil {
		m.tlsReloads.WithLabelValues("failure").Inc()
		return
	}
	m.tlsReloads.WithLabelValues("success").Inc()
	m.tlsReloads.WithLabelValues("failure")
	m.tlsNotAfter.WithLabelValues().Set(float64(notAfter.Unix()))
	m.tlsHandshakes.WithLabelValues()
}

// TLSHandshakeFailed counts a TLS handshake that failed.
func (m *Metrics) TLSHandshakeFailed() { m.tlsHandshakes.WithLabelValues().Inc() }

// registerRefundMetric registers the count of refunds that failed for good
// on the Redis Cluster path (redisstore.WithRefundErrorHandler): each one
// leaves a denied request's cost consumed on the limits that allowed it.
func registerRefundMetric(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlimit_refund_failures_total",
		Help: "Refunds after a denial on Redis Cluster that failed for good: the limits that allowed keep the denied request's cost until their window passes.",
	})
	return c, reg.Register(c)
}

// registerMemoryMetrics registers the in-memory store's size against its
// bounds and the new keys it refused because it was full of live states:
// the store itself without Redis, the local fallback with Redis.
func registerMemoryMetrics(reg prometheus.Registerer, mem *memory.Store) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "redlimit_memory_states", Help: "States (key, algorithm, period) the memory store holds.",
		}, func() float64 { return float64(mem.Stats().States) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "redlimit_memory_bytes", Help: "Estimated bytes of the memory store's states and keys (bounded by memory.WithMaxBytes).",
		}, func() float64 { return float64(mem.Stats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "redlimit_memory_refused_total", Help: "Requests for a new key denied because the memory store was full of states still in use.",
		}, func() float64 { return float64(mem.Stats().Refused) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
