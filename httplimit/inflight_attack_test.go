package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

// serveRecovering serves one request through h, and recovers its panic as
// net/http's server does; it returns the status, or 0 after a panic.
func serveRecovering(h http.Handler, header ...string) (status int) {
	defer func() {
		if recover() != nil {
			status = 0
		}
	}()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestInFlightPanics: a panic while a request holds in-flight slots (in
// the handler, or in a later in-flight rule's key function) frees every
// slot it took: the next request of the key is served. One request's
// panic never locks out the others.
func TestInFlightPanics(t *testing.T) {
	stores := rulesettest.NewStores(t, "httplimit", nil)
	const ttl = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		lim  redlimit.Limiter
	}{{"memory", stores.Memory}, {"redis", stores.Redis}} {
		for _, where := range []string{"handler", "key"} {
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if where == "handler" && r.Header.Get("X-Boom") != "" {
						panic("handler boom")
					}
				})
				m := mustNew(t, tc.lim, httplimit.Options{},
					httplimit.Rule{Name: "jobs-" + where, InFlight: redlimit.InFlight(1, ttl), Key: httplimit.Static("all")},
					httplimit.Rule{Name: "user-" + where, InFlight: redlimit.InFlight(1, ttl), Key: func(r *http.Request) (string, error) {
						if where == "key" && r.Header.Get("X-Boom") != "" {
							panic("key boom")
						}
						return "u", nil
					}},
				).Handle(h)
				// A key function's panic fails its request alone (400).
				want := map[string]int{"handler": 0, "key": http.StatusBadRequest}[where]
				if got := serveRecovering(m, "X-Boom", "1"); got != want {
					t.Fatalf("the request that panics: status %d, want %d", got, want)
				}
				time.Sleep(3 * ttl)
				if got := serveRecovering(m); got != http.StatusOK {
					t.Fatalf("a request %v after another's panic: status %d, want 200", 3*ttl, got)
				}
			})
		}
	}
}
