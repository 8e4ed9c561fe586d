package redlimitprom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
	redlimitprom "github.com/redlimit/redlimit/prometheus"
	"github.com/redlimit/redlimit/resilient"
)

// An HTTP server limited by httplimit, its limiter's metrics served on
// /metrics. The store is in process here, so that the example runs
// anywhere; in production it is redisstore's, with its node registry as
// resilient.Options.Nodes.
func Example() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	reg := prometheus.NewRegistry()
	metrics, err := redlimitprom.New(reg, redlimitprom.Options{})
	if err != nil {
		panic(err)
	}
	l, err := resilient.New(store, resilient.Options{Observer: metrics})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	metrics.Watch(l)
	limits, err := httplimit.New(l, httplimit.Options{},
		httplimit.Rule{Name: "all", Limit: redlimit.PerMinute(2), Key: httplimit.Static("all")})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", limits.Handle(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// http.ListenAndServe(addr, mux) in a program; here, three requests.
	for range 3 {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(rec.Code)
	}
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() != "redlimit_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Println(f.GetName(), m.GetLabel()[0].GetValue(), m.GetLabel()[1].GetValue(), v)
			}
		}
	}
	// Output:
	// 200
	// 200
	// 429
	// redlimit_decisions_total allowed store 2
	// redlimit_decisions_total denied store 1
}
