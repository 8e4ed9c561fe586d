package redlimitprom

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/resilient"
)

// Options configure a [Collector]. The zero value is the default.
type Options struct {
	// ConstLabels are added to every series, to tell apart the
	// collectors of several limiters on one registry. Default: none.
	ConstLabels prometheus.Labels
}

// Collector is a [resilient.Observer] that counts what a
// [resilient.Limiter] does as Prometheus metrics (see the package
// documentation for their names). Set it as the Limiter's
// Options.Observer, then call [Collector.Watch] with the Limiter for the
// reconciliation's counts. A Collector is safe for concurrent use.
type Collector struct {
	decisions [2][redlimit.Undecided + 1]prometheus.Counter // by allowance (0 denied, 1 allowed) and source
	storeTime prometheus.Histogram
	storeErrs prometheus.Counter
	changes   *prometheus.CounterVec
	state     atomic.Int32 // index in breakerStates
	limiter   atomic.Pointer[resilient.Limiter]

	stateDesc, owedDesc, unitsDesc *prometheus.Desc
}

var (
	_ resilient.Observer   = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// breakerStates are the breaker's states, as resilient names them.
var breakerStates = [...]string{"closed", "open", "half-open"}

// latencyBuckets span 50 µs to 1 s.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// New returns a Collector with its metrics registered on reg.
func New(reg prometheus.Registerer, opts Options) (*Collector, error) {
	if reg == nil {
		return nil, errors.New("redlimitprom: nil Registerer")
	}
	labels := opts.ConstLabels
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redlimit_decisions_total", ConstLabels: labels,
		Help: "Limits decided, by outcome (allowed, denied) and the path that decided (store, deny_cache, local, fail_open, fail_closed, undecided).",
	}, []string{"outcome", "source"})
	c := &Collector{
		storeTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "redlimit_store_duration_seconds", ConstLabels: labels, Buckets: latencyBuckets,
			Help: "Time the limiter waited for one call to the store (Redis), failed calls included.",
		}),
		storeErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redlimit_store_errors_total", ConstLabels: labels,
			Help: "Calls to the store that failed or did not answer in time; the failure policies answered them.",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redlimit_breaker_changes_total", ConstLabels: labels,
			Help: "Changes of the circuit breaker's state, by the state left and the state entered.",
		}, []string{"from", "to"}),
		stateDesc: prometheus.NewDesc("redlimit_breaker_state",
			"1 for the circuit breaker's current state.", []string{"state"}, labels),
		owedDesc: prometheus.NewDesc("redlimit_reconcile_pending",
			"States whose units counted locally during an outage wait to be charged to the store.", nil, labels),
		unitsDesc: prometheus.NewDesc("redlimit_reconcile_units_total",
			"Units counted locally during an outage, by what became of them: charged (the store confirmed), unconfirmed (a try not known to be counted), dropped (not recorded: the bound was reached), expired (not charged: their period passed).",
			[]string{"result"}, labels),
	}
	for ok := range c.decisions {
		for src := range c.decisions[ok] {
			c.decisions[ok][src] = decisions.WithLabelValues([...]string{"denied", "allowed"}[ok], redlimit.Source(src).String())
		}
	}
	c.changes.WithLabelValues("closed", "open") // visible from the start
	for _, col := range []prometheus.Collector{decisions, c.storeTime, c.storeErrs, c.changes, c} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Watch makes c report l's reconciliation (resilient.Limiter.Reconciliation),
// read at each scrape. Call it once, with the Limiter c observes.
func (c *Collector) Watch(l *resilient.Limiter) { c.limiter.Store(l) }

// Decided implements [resilient.Observer].
func (c *Collector) Decided(allowed bool, source redlimit.Source) {
	ok := 0
	if allowed {
		ok = 1
	}
	if int(source) < len(c.decisions[ok]) {
		c.decisions[ok][source].Inc()
	}
}

// StoreCalled implements [resilient.Observer].
func (c *Collector) StoreCalled(took time.Duration, err error) {
	c.storeTime.Observe(took.Seconds())
	if err != nil {
		c.storeErrs.Inc()
	}
}

// BreakerChanged implements [resilient.Observer].
func (c *Collector) BreakerChanged(from, to string, _ error) {
	for i, s := range breakerStates {
		if s == to {
			c.state.Store(int32(i))
		}
	}
	c.changes.WithLabelValues(from, to).Inc()
}

// Describe implements [prometheus.Collector] for the series read at each
// scrape.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stateDesc
	ch <- c.owedDesc
	ch <- c.unitsDesc
}

// Collect implements [prometheus.Collector]: the breaker's state, one
// series per state with 1 for the current one (one reading, so a scrape
// never shows two), and the reconciliation's counts once watched.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.state.Load()
	for i, s := range breakerStates {
		v := 0.0
		if int32(i) == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.stateDesc, prometheus.GaugeValue, v, s)
	}
	l := c.limiter.Load()
	if l == nil {
		return
	}
	r := l.Reconciliation()
	ch <- prometheus.MustNewConstMetric(c.owedDesc, prometheus.GaugeValue, float64(r.Owed))
	for _, u := range []struct {
		result string
		units  int64
	}{{"charged", r.Charged}, {"unconfirmed", r.Unconfirmed}, {"dropped", r.Dropped}, {"expired", r.Expired}} {
		ch <- prometheus.MustNewConstMetric(c.unitsDesc, prometheus.CounterValue, float64(u.units), u.result)
	}
}
