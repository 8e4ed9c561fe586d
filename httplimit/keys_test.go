package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

func headerReq(kv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/a/b", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

func TestKeyFuncs(t *testing.T) {
	t.Parallel()
	a, b := httplimit.Header("X-A"), httplimit.Header("X-B")
	tests := []struct {
		name  string
		key   httplimit.KeyFunc
		req   *http.Request
		want  string
		noKey bool
	}{
		{name: "header", key: a, req: headerReq("X-A", "k1"), want: "k1"},
		{name: "header missing", key: a, req: headerReq(), noKey: true},
		{name: "header empty", key: a, req: headerReq("X-A", ""), noKey: true},
		{name: "header name case", key: httplimit.Header("x-a"), req: headerReq("X-A", "k1"), want: "k1"},
		{name: "user", key: httplimit.User, req: headerReq().WithContext(httplimit.WithUser(t.Context(), "u7")), want: "u7"},
		{name: "empty user", key: httplimit.User, req: headerReq().WithContext(httplimit.WithUser(t.Context(), "")), noKey: true},
		{name: "route without pattern", key: httplimit.Route, req: headerReq(), want: "GET /a/b"},
		{name: "compose", key: httplimit.Compose(a, b), req: headerReq("X-A", "x", "X-B", "y"), want: "x|y"},
		{name: "compose escapes |", key: httplimit.Compose(a, b), req: headerReq("X-A", "x|y", "X-B", "z"), want: "x%7Cy|z"},
		{name: "compose escapes %", key: httplimit.Compose(a, b), req: headerReq("X-A", "x%7Cy", "X-B", "z"), want: "x%257Cy|z"},
		{name: "compose missing part", key: httplimit.Compose(a, b), req: headerReq("X-A", "x"), noKey: true},
		{name: "compose ip and route", key: httplimit.Compose(httplimit.RemoteIP, httplimit.Route), req: headerReq(), want: "192.0.2.1|GET /a/b"},
		{name: "or first", key: httplimit.Or(a, httplimit.RemoteIP), req: headerReq("X-A", "k"), want: "0:k"},
		{name: "or fallback", key: httplimit.Or(a, httplimit.RemoteIP), req: headerReq(), want: "1:192.0.2.1"},
		{name: "or none", key: httplimit.Or(a, b), req: headerReq(), noKey: true},
		{name: "static", key: httplimit.Static("all"), req: headerReq(), want: "all"},
		{name: "hashed", key: httplimit.Hashed(a), req: headerReq("X-A", "secret"), want: "2bb80d537b1da3e38bd30361aa855686"},
		{name: "hashed missing", key: httplimit.Hashed(a), req: headerReq(), noKey: true},
	}
	for _, tt := range tests {
		got, err := tt.key(tt.req)
		if tt.noKey {
			if !errors.Is(err, httplimit.ErrNoKey) {
				t.Errorf("%s: %q, %v; want ErrNoKey", tt.name, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}

	// No two different part lists compose to the same key, and Or keeps
	// its alternatives apart.
	ab := httplimit.Compose(a, b)
	k1, _ := ab(headerReq("X-A", "x|y", "X-B", "z"))
	k2, _ := ab(headerReq("X-A", "x", "X-B", "y|z"))
	if k1 == k2 {
		t.Errorf("Compose: %q for both splits", k1)
	}
	or := httplimit.Or(a, httplimit.RemoteIP)
	k1, _ = or(headerReq("X-A", "192.0.2.9"))
	r := headerReq()
	r.RemoteAddr = "192.0.2.9:1"
	k2, _ = or(r)
	if k1 == k2 {
		t.Errorf("Or: an API key spelling an IP shares the IP's key %q", k1)
	}

	// Errors other than ErrNoKey stop Or and Compose.
	boom := errors.New("boom")
	bad := func(*http.Request) (string, error) { return "", boom }
	for _, kf := range []httplimit.KeyFunc{httplimit.Or(bad, a), httplimit.Compose(a, bad), httplimit.Hashed(bad)} {
		if _, err := kf(headerReq("X-A", "x")); !errors.Is(err, boom) {
			t.Errorf("error %v, want boom", err)
		}
	}
}

// TestRoutes checks route keys on a real server with the Go 1.22 mux: a
// middleware around a registered handler sees the pattern, and MuxRoute
// finds it for a middleware around the whole mux.
func TestRoutes(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	limit := redlimit.PerMinute(2)

	inner := mustNew(t, lim, httplimit.Options{}, httplimit.Rule{Name: "inner", Limit: limit, Key: httplimit.Route})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", inner.Handle(okHandler()))
	mux.Handle("GET /other", okHandler())
	outer := mustNew(t, lim, httplimit.Options{}, httplimit.Rule{Name: "outer", Limit: limit, Key: httplimit.MuxRoute(mux)})
	srv := serve(t, outer.Handle(mux))

	for i, c := range []struct {
		path   string
		status int
	}{
		{"/items/1", 200}, {"/items/2", 200}, {"/items/3", 429}, // one route, one bucket per rule
		{"/other", 200}, {"/other", 200}, {"/other", 429},
		{"/nowhere", 404}, {"/nowhere", 404}, {"/nowhere", 404}, // no route: no key, no limit
	} {
		resp, _ := get(t, srv.URL+c.path)
		if resp.StatusCode != c.status {
			t.Errorf("request %d to %s: status %d, want %d", i+1, c.path, resp.StatusCode, c.status)
		}
	}
	for key, want := range map[string]bool{
		"outer:GET /items/{id}": false, "inner:GET /items/{id}": false, "outer:GET /other": false,
	} {
		if res, _ := lim.Peek(t.Context(), key, limit, 1); res.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", key, res.Allowed, want)
		}
	}
}
