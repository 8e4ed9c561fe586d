package redlimitprom_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/redistest"
	redlimitprom "github.com/redlimit/redlimit/prometheus"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// value returns the value of the series of name with labels (name=value
// pairs), or -1 if there is none.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

// TestCollectorThroughHTTP: an HTTP server limited by httplimit on a
// resilient Limiter over a real Redis, observed by a Collector. The
// decisions counted by outcome and source match what the handler
// answered, from many clients at once; once Redis is killed (SIGKILL),
// the breaker shows open, store errors are counted, and the local
// fallback's decisions are counted as such.
func TestCollectorThroughHTTP(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // killed below: not the shared one
	ctx := context.Background()
	store, err := redisstore.Open(ctx, "redis://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewPedanticRegistry()
	c, err := redlimitprom.New(reg, redlimitprom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := resilient.New(store, resilient.Options{Observer: c, Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: time.Hour}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c.Watch(l)
	mw, err := httplimit.New(l, httplimit.Options{},
		httplimit.Rule{Name: "user", Limit: redlimit.PerHour(5), Key: httplimit.Header("X-User")})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handle(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var mu sync.Mutex
	answered := map[int]int{}
	requests := func(phase string, users, each int) {
		var wg sync.WaitGroup
		for u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					req := httptest.NewRequest(http.MethodGet, "/", nil)
					req.Header.Set("X-User", phase+string(rune('a'+u)))
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					mu.Lock()
					answered[rec.Code]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	requests("up", 8, 9) // 5 allowed each, then 4 denied: 1 by the store, 3 by the deny cache
	decided := func(outcome, source string) float64 {
		return value(t, reg, "redlimit_decisions_total", "outcome", outcome, "source", source)
	}
	allowed := decided("allowed", "store")
	denied := decided("denied", "store") + decided("denied", "deny_cache")
	if int(allowed) != answered[http.StatusOK] || int(denied) != answered[http.StatusTooManyRequests] || allowed != 40 || denied != 32 {
		t.Fatalf("Redis up: counted %v allowed and %v denied; the handler answered %v", allowed, denied, answered)
	}
	if got := value(t, reg, "redlimit_breaker_state", "state", "closed"); got != 1 {
		t.Errorf("breaker closed = %v, want 1", got)
	}
	if calls := value(t, reg, "redlimit_store_duration_seconds"); calls < 40 || value(t, reg, "redlimit_store_errors_total") != 0 {
		t.Errorf("Redis up: %v store calls, %v errors; want at least 40, none", calls, value(t, reg, "redlimit_store_errors_total"))
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	answered = map[int]int{}
	requests("down", 4, 6) // the local fallback, one node: 5 allowed each, then 1 denied
	local := decided("allowed", "local")
	localDenied := decided("denied", "local")
	if int(local) != answered[http.StatusOK] || int(localDenied) != answered[http.StatusTooManyRequests] || local != 20 || localDenied != 4 {
		t.Errorf("Redis killed: counted %v allowed and %v denied by the local fallback; the handler answered %v", local, localDenied, answered)
	}
	if got := value(t, reg, "redlimit_breaker_state", "state", "open"); got != 1 {
		t.Errorf("breaker open = %v, want 1", got)
	}
	if got := value(t, reg, "redlimit_breaker_changes_total", "from", "closed", "to", "open"); got != 1 {
		t.Errorf("breaker changes closed to open = %v, want 1", got)
	}
	if got := value(t, reg, "redlimit_store_errors_total"); got < 1 {
		t.Errorf("store errors = %v, want at least 1", got)
	}
	if got := value(t, reg, "redlimit_reconcile_pending"); got < 1 {
		t.Errorf("reconcile owed = %v, want the states the fallback admitted", got)
	}
	// Every series is well formed (the pedantic registry checks them).
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestBreakerStateOneAtATime: each scrape shows exactly one state at 1,
// while the state changes as it is read.
func TestBreakerStateOneAtATime(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c, err := redlimitprom.New(reg, redlimitprom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.BreakerChanged("closed", "open", nil)
			c.BreakerChanged("open", "half-open", nil)
			c.BreakerChanged("half-open", "closed", nil)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for range 50 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, f := range families {
			if f.GetName() == "redlimit_breaker_state" {
				for _, m := range f.GetMetric() {
					sum += m.GetGauge().GetValue()
				}
			}
		}
		if sum != 1 {
			t.Fatalf("a scrape shows %v states at 1, want 1", sum)
		}
	}
}
