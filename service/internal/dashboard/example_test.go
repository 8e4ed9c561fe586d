package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/dashboard"
)

// A service records each limited descriptor's decision and serves the
// dashboard beside its own endpoints.
func Example() {
	rec := dashboard.NewRecorder(dashboard.RecorderOptions{})

	// On the request path, once per limited descriptor:
	rec.Observe(dashboard.Event{
		Domain: "api", Rule: "api.remote_address", Key: "10.0.0.1",
		Allowed: true, Source: redlimit.FromStore, Latency: 300 * time.Microsecond,
	})
	rec.Observe(dashboard.Event{
		Domain: "api", Rule: "api.remote_address", Key: "10.0.0.2",
		Allowed: false, Source: redlimit.FromDenyCache,
	})

	mux := http.NewServeMux()
	// mux.Handle("/json", ...) and the service's other endpoints go here.
	mux.Handle("/", dashboard.Handler(rec, dashboard.Options{
		Rules: func() any { return []string{} }, // the service passes its loaded rules
	}))

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/stats", nil))
	var s dashboard.Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		panic(err)
	}
	fmt.Printf("allowed %d, denied %d\n", s.Totals.Allowed, s.Totals.Denied)
	for _, k := range s.TopKeys {
		fmt.Printf("most limited: %s (%s) %d\n", k.Key, k.Rule, k.Count)
	}
	// Output:
	// allowed 1, denied 1
	// most limited: 10.0.0.2 (api.remote_address) 1
}
