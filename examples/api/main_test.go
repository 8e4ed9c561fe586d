package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/backoff"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newTestServer serves the API on a memory store whose clock stands still,
// behind a trusted "proxy" (the test itself, on 127.0.0.1), so that tests
// pick client addresses with X-Forwarded-For.
func newTestServer(t *testing.T, shadowWrites bool) *httptest.Server {
	t.Helper()
	t0 := time.Now().Truncate(time.Second)
	lim, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	h, err := newHandler(lim, config{
		trusted:      []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		apiKeys:      demoKeys,
		shadowWrites: shadowWrites,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type call struct {
	method, path, ip, key, body string
}

func do(t *testing.T, srv *httptest.Server, c call) (*http.Response, map[string]any) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.ip != "" {
		req.Header.Set("X-Forwarded-For", c.ip)
	}
	if c.key != "" {
		req.Header.Set("X-API-Key", c.key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, c.path, b, err)
		}
	}
	return resp, body
}

func TestAnonymousPerIP(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, false)
	for i := range 5 {
		resp, _ := do(t, srv, call{path: "/v1/items", ip: "198.51.100.1"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
		}
		// A sliding window is back to a full allowance two windows on.
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"ip";r=%d;t=2`, 4-i); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"ip";q=5;w=1` {
			t.Errorf("request %d: RateLimit-Policy %q", i+1, got)
		}
	}
	resp, body := do(t, srv, call{path: "/v1/items", ip: "198.51.100.1"})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("6th request: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp.Header.Get("Content-Type") != "application/problem+json" || body["limit"] != "ip" || body["status"] != 429.0 {
		t.Errorf("6th request: %s %v", resp.Header.Get("Content-Type"), body)
	}
	if resp, _ := do(t, srv, call{path: "/v1/items", ip: "198.51.100.2"}); resp.StatusCode != http.StatusOK {
		t.Errorf("another client: status %d", resp.StatusCode)
	}
	// Health checks are not limited.
	for range 10 {
		if resp, _ := do(t, srv, call{path: "/healthz", ip: "198.51.100.1"}); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("healthz: status %d, RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
}

func TestPerUser(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, false)
	// Alice's 100 a minute, from 25 addresses, 4 each: within every per-IP limit.
	for i := range 100 {
		resp, _ := do(t, srv, call{path: "/v1/items", ip: fmt.Sprintf("203.0.113.%d", i/4), key: "alice-key"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
		}
	}
	resp, body := do(t, srv, call{path: "/v1/items", ip: "203.0.113.200", key: "alice-key"})
	if resp.StatusCode != http.StatusTooManyRequests || body["limit"] != "user" || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("101st request: status %d, Retry-After %q, %v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if !strings.HasPrefix(resp.Header.Get("RateLimit"), `"user";r=0;`) {
		t.Errorf("RateLimit %q", resp.Header.Get("RateLimit"))
	}
	// The denial consumed nothing: that address still has all 5.
	for i := range 5 {
		if resp, _ := do(t, srv, call{path: "/v1/items", ip: "203.0.113.200"}); resp.StatusCode != http.StatusOK {
			t.Fatalf("anonymous request %d from the same address: status %d", i+1, resp.StatusCode)
		}
	}
	if resp, _ := do(t, srv, call{path: "/v1/items", ip: "203.0.113.201", key: "bob-key"}); resp.StatusCode != http.StatusOK {
		t.Errorf("bob: status %d", resp.StatusCode)
	}
	if resp, body := do(t, srv, call{path: "/v1/items", ip: "203.0.113.202", key: "mallory-key"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown key: status %d, %v", resp.StatusCode, body)
	}
}

func TestWrites(t *testing.T) {
	t.Parallel()
	for _, shadow := range []bool{false, true} {
		srv := newTestServer(t, shadow)
		for i := range 10 {
			resp, body := do(t, srv, call{method: "POST", path: "/v1/items", ip: fmt.Sprintf("192.0.2.%d", i), key: "bob-key", body: `{"name":"thing"}`})
			if resp.StatusCode != http.StatusCreated || body["owner"] != "bob" {
				t.Fatalf("shadow %v: write %d: status %d, %v", shadow, i+1, resp.StatusCode, body)
			}
		}
		resp, body := do(t, srv, call{method: "POST", path: "/v1/items", ip: "192.0.2.99", key: "bob-key", body: `{"name":"thing"}`})
		want := http.StatusTooManyRequests
		if shadow {
			want = http.StatusCreated
		}
		if resp.StatusCode != want {
			t.Fatalf("shadow %v: 11th write: status %d, want %d (%v)", shadow, resp.StatusCode, want, body)
		}
		if !shadow && body["limit"] != "writes" {
			t.Errorf("11th write: %v", body)
		}
		// Reads are not writes.
		if resp, body := do(t, srv, call{path: "/v1/items/1", ip: "192.0.2.99", key: "bob-key"}); resp.StatusCode != http.StatusOK || body["name"] != "thing" {
			t.Errorf("shadow %v: read: status %d, %v", shadow, resp.StatusCode, body)
		}
	}
}

func TestCRUD(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, false)
	resp, body := do(t, srv, call{method: "POST", path: "/v1/items", body: `{"name":"a"}`})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/items/1" || body["owner"] != nil {
		t.Fatalf("create: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if resp, _ := do(t, srv, call{method: "POST", path: "/v1/items", body: `{"nom":"a"}`}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
	if resp, body := do(t, srv, call{path: "/v1/items"}); resp.StatusCode != http.StatusOK || len(body["items"].([]any)) != 1 {
		t.Errorf("list: %d %v", resp.StatusCode, body)
	}
	if resp, _ := do(t, srv, call{method: "DELETE", path: "/v1/items/1"}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, call{path: "/v1/items/1"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("get deleted: %d", resp.StatusCode)
	}
}

// TestRedisWithBackoffClient runs the API on Redis, as -redis does, and
// drives it with a client that backs off: more requests than the per-IP
// limit allows all get through, some after waiting.
func TestRedisWithBackoffClient(t *testing.T) {
	t.Parallel()
	lim, closeStore, err := openStore("redis://"+redistest.Shared(t).Addr(), fmt.Sprintf("api-t%x:", rand.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	h, err := newHandler(lim, config{apiKeys: demoKeys})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var denied int
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			denied++
		}
		return resp, err
	})
	client := &http.Client{Transport: &backoff.Transport{Base: base, Pace: true}}
	for i := range 8 {
		resp, err := client.Get(srv.URL + "/v1/items")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
		}
		if _, err := ratelimitfield.ParseRateLimit(resp.Header.Values("RateLimit")); err != nil {
			t.Errorf("request %d: %v", i+1, err)
		}
	}
	t.Logf("8 requests served, %d denials on the way", denied)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
