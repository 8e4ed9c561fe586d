package server

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit/service/internal/rls"
)

// envoyStatNames are envoyproxy/ratelimit's per-rule stats, in the order of
// envoySeries.hits.
var envoyStatNames = [...]string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// envoyStatPrefix starts the statsd name of every per-rule stat.
const envoyStatPrefix = "ratelimit.service.rate_limit."

// envoyStats counts hits as envoyproxy/ratelimit's stats do, by stat name:
// the rule label sanitized as its SanitizeStatName does. It is a
// prometheus.Collector of the series its default statsd mapper makes, and
// the source of the statsd counters. Its series are as bounded as the rule
// labels: a detailed_metric label that loses its slot (DropLabel) loses
// its series once no other label shares its name.
type envoyStats struct {
	mu     sync.RWMutex
	labels map[string]*envoySeries // by rule label
	series map[string]*envoySeries // by stat name
	// gone are series dropped with hits statsd has not sent; under mu.
	gone []*envoySeries
	desc [len(envoyStatNames)]*prometheus.Desc
}

// envoySeries is the counters of one stat name.
type envoySeries struct {
	name               string // the stat name, without envoyStatPrefix
	domain, key1, key2 string // its Prometheus labels
	refs               int    // rule labels of this name; under envoyStats.mu
	hits               [len(envoyStatNames)]atomic.Uint64
	sent               [len(envoyStatNames)]uint64 // what statsd has sent; under statsd.mu
}

func newEnvoyStats() *envoyStats {
	e := &envoyStats{labels: map[string]*envoySeries{}, series: map[string]*envoySeries{}}
	for i, name := range envoyStatNames {
		e.desc[i] = prometheus.NewDesc("ratelimit_service_rate_limit_"+name,
			"envoyproxy/ratelimit's "+name+" stat, by its default statsd mapper: hits per rule.",
			[]string{"domain", "key1", "key2"}, nil)
	}
	return e
}

// hits counts h under rule label.
func (e *envoyStats) hits(label string, h rls.EnvoyHits) {
	e.mu.RLock()
	s := e.labels[label]
	e.mu.RUnlock()
	if s == nil {
		s = e.add(label)
	}
	for i, n := range [...]uint64{h.TotalHits, h.OverLimit, h.NearLimit, h.WithinLimit, h.ShadowMode} {
		if n != 0 {
			s.hits[i].Add(n)
		}
	}
}

// add returns the series of label, made if it is the first of its name.
func (e *envoyStats) add(label string) *envoySeries {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.labels[label]; s != nil {
		return s
	}
	name := sanitizeStatName(label)
	s := e.series[name]
	if s == nil {
		s = &envoySeries{name: name}
		// The default mapper's labels: the first three parts of the name.
		parts := strings.SplitN(name, ".", 4)
		s.domain = parts[0]
		if len(parts) > 1 {
			s.key1 = parts[1]
		}
		if len(parts) > 2 {
			s.key2 = parts[2]
		}
		e.series[name] = s
	}
	s.refs++
	e.labels[label] = s
	return s
}

// drop forgets rule label; its series goes with the last label of its name.
func (e *envoyStats) drop(label string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.labels[label]
	if s == nil {
		return
	}
	delete(e.labels, label)
	if s.refs--; s.refs == 0 {
		delete(e.series, s.name)
		e.gone = append(e.gone, s)
	}
}

// Describe implements prometheus.Collector.
func (e *envoyStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range e.desc {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (e *envoyStats) Collect(ch chan<- prometheus.Metric) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, s := range e.series {
		for i, d := range e.desc {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(s.hits[i].Load()), s.domain, s.key1, s.key2)
		}
	}
}

// ipv4 matches what SanitizeStatName takes for an IPv4 address.
var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// statNameReplacer replaces what statsd gives a meaning to.
var statNameReplacer = strings.NewReplacer(":", "_", "|", "_")

// sanitizeStatName returns a rule label as envoyproxy/ratelimit names its
// stat: ':' and '|' become '_', and so do the dots of IPv4 addresses.
func sanitizeStatName(s string) string {
	return ipv4.ReplaceAllStringFunc(statNameReplacer.Replace(s), func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}

// envoyObserver is the service's observer with envoyproxy/ratelimit's
// stats: it implements rls.HitCounter, and drops a label's stats with its
// other series.
type envoyObserver struct {
	rls.Observer
	stats *envoyStats
}

var (
	_ rls.HitCounter   = envoyObserver{}
	_ rls.LabelDropper = envoyObserver{}
)

// Hits implements rls.HitCounter.
func (o envoyObserver) Hits(_, rule string, h rls.EnvoyHits) { o.stats.hits(rule, h) }

// DropLabel implements rls.LabelDropper.
func (o envoyObserver) DropLabel(domain, rule string) {
	if d, ok := o.Observer.(rls.LabelDropper); ok {
		d.DropLabel(domain, rule)
	}
	o.stats.drop(rule)
}

// envoyMetrics sets up what Options say of envoyproxy/ratelimit's stats:
// the Prometheus address, the series, statsd. It returns obs, with the
// stats when they are counted.
func (s *Server) envoyMetrics(obs rls.Observer) (rls.Observer, error) {
	if s.opts.PrometheusAddr != "" {
		path := cmp.Or(s.opts.PrometheusPath, "/metrics")
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("%w: PrometheusPath %q does not start with /", ErrOptions, path)
		}
		ln, err := listen(s.opts.PrometheusAddr, s.opts.UnixSocketMode)
		if err != nil {
			return nil, fmt.Errorf("server: Prometheus: %w", err)
		}
		s.promLn = ln
		mux := http.NewServeMux()
		mux.Handle("GET "+path, promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
		s.prom = &http.Server{Handler: mux, ReadHeaderTimeout: promReadHeaderTimeout}
	}
	if !s.opts.EnvoyMetrics && s.opts.StatsdAddr == "" {
		return obs, nil
	}
	s.envoy = newEnvoyStats()
	if s.opts.EnvoyMetrics {
		if err := s.registry.Register(s.envoy); err != nil {
			return nil, fmt.Errorf("server: metrics: %w", err)
		}
	}
	if s.opts.StatsdAddr != "" {
		every := cmp.Or(s.opts.StatsFlushInterval, DefaultStatsFlushInterval)
		if every < 0 {
			return nil, fmt.Errorf("%w: negative StatsFlushInterval", ErrOptions)
		}
		s.statsd = &statsd{addr: s.opts.StatsdAddr, tags: statsdTags(s.opts.StatsdTags), every: every, stats: s.envoy, log: s.log}
	}
	return envoyObserver{Observer: obs, stats: s.envoy}, nil
}

// promReadHeaderTimeout bounds a scrape's request headers.
const promReadHeaderTimeout = 10 * time.Second

// PrometheusAddr returns the address of Options.PrometheusAddr's listener,
// or "" without one.
func (s *Server) PrometheusAddr() string {
	if s.promLn == nil {
		return ""
	}
	return addrString(s.promLn)
}
