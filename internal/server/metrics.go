package server

import (
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/rls"
)

// Metrics are the service's Prometheus metrics, on a registry of its own.
// Metrics implements rls.Observer.
//
//	redlimit_rls_requests_total{answer}                   ok, over_limit, invalid, unavailable, error
//	redlimit_rls_request_duration_seconds                 time to answer a request
//	redlimit_rls_decisions_total{domain,rule,outcome}     per limited descriptor: allowed, denied, shadow_denied, unlimited
//	redlimit_rls_decisions_by_source_total{source}        per limited descriptor, the path that decided:
//	                                                      store, deny_cache, local, fail_open, fail_closed
//	redlimit_backend_duration_seconds                     one call to the limiter (Redis through resilient, or memory)
//	redlimit_backend_errors_total{reason}                 calls that failed (error) or that the failure policies
//	                                                      answered because the store failed or the breaker was open
//	                                                      (local, fail_open, fail_closed)
//	redlimit_breaker_state{state}                         1 for the circuit breaker's state (closed, open, half-open)
//	redlimit_config_reloads_total{result}                 success, failure (the first load included)
//	redlimit_config_last_reload_success_timestamp_seconds
//	redlimit_config_rules                                 rules of the configuration in use
//
// and the Go runtime and process collectors.
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

	// The series of fixed label values, looked up once rather than by
	// label (a hash and a lock) at every decision.
	answers   map[string]prometheus.Counter
	sources   [redlimit.FromFailClosed + 1]prometheus.Counter // by redlimit.Source
	errs      prometheus.Counter                              // backendErrs "error"
	policyErr [redlimit.FromFailClosed + 1]prometheus.Counter // backendErrs by failure-policy source; nil for the others
}

var _ rls.Observer = (*Metrics)(nil)

// latencyBuckets span 50 µs to 1 s.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// NewMetrics registers the service's metrics on reg. breaker, if not nil,
// reports the circuit breaker's state ("closed", "open" or "half-open").
func NewMetrics(reg prometheus.Registerer, breaker func() string) (*Metrics, error) {
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
	}
	cs := []prometheus.Collector{m.requests, m.requestTime, m.decisions, m.bySource, m.backendTime, m.backendErrs,
		m.reloads, m.lastReload, m.rules,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	if breaker != nil {
		for _, state := range []string{"closed", "open", "half-open"} {
			cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "redlimit_breaker_state", Help: "1 for the circuit breaker's current state.",
				ConstLabels: prometheus.Labels{"state": state},
			}, func() float64 {
				if breaker() == state {
					return 1
				}
				return 0
			}))
		}
	}
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
