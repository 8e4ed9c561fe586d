package server

import (
	"errors"
	"net/http"
	"sync"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/dashboard"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// observer is the service's rls.Observer with the dashboard on: it reports
// every decision to the Prometheus metrics and to the dashboard's recorder.
type observer struct {
	metrics *Metrics
	rec     *dashboard.Recorder
}

var (
	_ rls.Observer     = observer{}
	_ rls.LabelDropper = observer{}
)

// Request implements rls.Observer.
func (o observer) Request(answer string, took time.Duration) { o.metrics.Request(answer, took) }

// Descriptor implements rls.Observer. The dashboard counts limited
// descriptors, not unlimited ones, and lists the keys of denials (shadow
// denials included), so only those format the entries.
func (o observer) Descriptor(domain, rule string, out rls.Outcome, src redlimit.Source, entries []*rlpb.RateLimitDescriptor_Entry) {
	o.metrics.Descriptor(domain, rule, out, src, entries)
	if out == rls.Unlimited || out == rls.Undecided {
		return
	}
	e := dashboard.Event{Domain: domain, Rule: rule, Allowed: out == rls.Allowed, Shadow: out == rls.ShadowDenied, Source: src}
	if !e.Allowed {
		e.Key = rls.FormatEntries(entries)
	}
	o.rec.Observe(e)
}

// DropLabel implements rls.LabelDropper: the Prometheus series of the
// label are deleted; the dashboard keeps its own bounded table of series.
func (o observer) DropLabel(domain, rule string) { o.metrics.DropLabel(domain, rule) }

// Backend implements rls.Observer. The dashboard takes the latency of each
// call, but for those the deny cache answered without asking the store. It
// counts as backend errors the calls that failed, and those a failure
// policy answered, as redlimit_backend_errors_total does.
func (o observer) Backend(took time.Duration, src redlimit.Source, err error) {
	o.metrics.Backend(took, src, err)
	if src != redlimit.FromDenyCache {
		o.rec.Latency(took)
	}
	if err == nil {
		err = policyAnswered(src)
	}
	o.rec.BackendError(err)
}

// The backend errors the dashboard shows when a failure policy answered.
// They are made once: Backend allocates nothing per call.
var (
	errLocal      = errors.New("the store failed or the breaker is open: the local fallback answered")
	errFailOpen   = errors.New("the store failed or the breaker is open: fail_open allowed")
	errFailClosed = errors.New("the store failed or the breaker is open: fail_closed denied")
)

// policyAnswered returns the error to record when src is a failure policy,
// or nil.
func policyAnswered(src redlimit.Source) error {
	switch src {
	case redlimit.FromLocal:
		return errLocal
	case redlimit.FromFailOpen:
		return errFailOpen
	case redlimit.FromFailClosed:
		return errFailClosed
	}
	return nil
}

// ruleNames are the names the rule files give their rules, by domain and
// path, for the dashboard: built again when the configuration changes.
type ruleNames struct {
	mu    sync.Mutex
	cfg   *config.Config
	names map[[2]string]string
}

// lookup returns the dashboard's RuleName on the configuration current returns.
func (n *ruleNames) lookup(current func() *config.Config) func(domain, rule string) string {
	return func(domain, rule string) string {
		n.mu.Lock()
		defer n.mu.Unlock()
		if cfg := current(); cfg != n.cfg {
			n.cfg, n.names = cfg, make(map[[2]string]string)
			for _, r := range cfg.Rules() {
				if r.Name != "" {
					n.names[[2]string{r.Domain, r.Path}] = r.Name
				}
			}
		}
		return n.names[[2]string{domain, rule}]
	}
}

// newDashboard makes the recorder the service feeds. breaker reports the
// circuit breaker's state, on Redis; on memory there is none (nil), and
// the page says "n/a".
func (s *Server) newDashboard(breaker func() string) {
	s.recorder = dashboard.NewRecorder(dashboard.RecorderOptions{BreakerState: breaker})
	done := make(chan struct{})
	s.dashDone = done
	s.closeDashboard = sync.OnceFunc(func() { close(done) })
}

// dashboardHandler returns the dashboard's pages, its rules those of GET
// /rules and its try form posting to /json. Its event streams end when the
// HTTP server starts shutting down: http.Server's Shutdown would wait for
// them.
func (s *Server) dashboardHandler() http.Handler {
	return dashboard.Handler(s.recorder, dashboard.Options{
		Rules:    func() any { return s.rulesView() },
		RuleName: s.ruleNames.lookup(s.svc.Config),
		JSONPath: "/json",
		Done:     s.dashDone,
	})
}
