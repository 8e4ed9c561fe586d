package httplimit_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// A middleware with one rule, 2 requests a minute per client IP, in front of
// a handler on a real server. The store's clock stands still, so that the
// output does not depend on when the example runs.
func Example() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	limits, err := httplimit.New(store, httplimit.Options{},
		httplimit.Rule{Name: "ip", Limit: redlimit.PerMinute(2).SlidingLog(), Key: httplimit.RemoteIP})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv := httptest.NewServer(limits.Handle(mux))
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL + "/hello")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
		if resp.StatusCode != http.StatusOK {
			fmt.Println("Retry-After:", resp.Header.Get("Retry-After"))
			fmt.Print(string(body))
		}
	}
	// Output:
	// 200 "ip";q=2;w=60 "ip";r=1;t=60
	// 200 "ip";q=2;w=60 "ip";r=0;t=60
	// 429 "ip";q=2;w=60 "ip";r=0;t=60
	// Retry-After: 60
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"Rate limit \"ip\" (2/1m sliding_log) exceeded: retry after 60 seconds.","violated-policies":["ip"],"limit":"ip","retry_after_seconds":60}
}

// Behind a reverse proxy, the client is the right-most address of
// X-Forwarded-For that is not a trusted proxy: whatever the client wrote
// itself, further left, does not count.
func ExampleIPKey() {
	key, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:51000" // the proxy
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.1")
	fmt.Println(key(r))

	r.RemoteAddr = "[2001:db8:aa:bb::1]:51000" // no proxy: IPv6 by /64
	fmt.Println(key(r))
	// Output:
	// 198.51.100.7 <nil>
	// 2001:db8:aa:bb::/64 <nil>
}

// Compose keys by several things at once; its parts are escaped so that no
// choice of header values forges another combination. Or falls back when a
// key function finds nothing to key by.
func ExampleCompose() {
	perRoute := httplimit.Compose(httplimit.RemoteIP, httplimit.Route)
	perKey := httplimit.Or(httplimit.Header("X-API-Key"), httplimit.RemoteIP)

	r := httptest.NewRequest(http.MethodGet, "/items/7", nil)
	r.RemoteAddr = "192.0.2.1:4000"
	fmt.Println(perRoute(r))
	fmt.Println(perKey(r))
	r.Header.Set("X-API-Key", "k|1")
	fmt.Println(perKey(r))
	// Output:
	// 192.0.2.1|GET /items/7 <nil>
	// 1:192.0.2.1 <nil>
	// 0:k|1 <nil>
}

// A shadow rule is decided, counted and logged, but never denies and sets
// no header field: try a limit out before enforcing it.
func ExampleRule_shadow() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	limits, err := httplimit.New(store, httplimit.Options{Headers: ratelimitfield.X, Logger: logger},
		httplimit.Rule{Name: "strict", Limit: redlimit.PerMinute(1).SlidingLog(), Key: httplimit.RemoteIP, Shadow: true})
	if err != nil {
		panic(err)
	}
	h := limits.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%d %q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// 200 ""
	// level=INFO msg="httplimit: shadow rule would deny" method=GET path=/ rule=strict limit="1/1m sliding_log" key=strict:192.0.2.1 retry_after=1m0s
	// 200 ""
}
