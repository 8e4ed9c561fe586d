package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redlimit/redlimit/memory"
)

// newTestHandler returns the API on a memory store whose clock stands still,
// so a burst never straddles a window.
func newTestHandler(t *testing.T) http.Handler {
	t.Helper()
	t0 := time.Unix(1_700_000_000, 0)
	s, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return newHandler(s)
}

func get(h http.Handler, ip, apiKey string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/hello", nil)
	r.RemoteAddr = ip + ":40000"
	if apiKey != "" {
		r.Header.Set("X-API-Key", apiKey)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestBurstPerIP(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t)

	for i := range 5 {
		w := get(h, "192.0.2.1", "")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200; body %s", i+1, w.Code, w.Body)
		}
		if got, want := w.Header().Get("X-RateLimit-Remaining"), fmt.Sprint(4-i); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i+1, got, want)
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "5" {
			t.Errorf("request %d: X-RateLimit-Limit %q, want 5", i+1, got)
		}
	}

	w := get(h, "192.0.2.1", "")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("6th request: status %d, want 429", w.Code)
	}
	// The sliding window admits again 1.2s on, in the next window, when the
	// estimate 5 × (1 - 0.2) = 4 leaves room for one: 2 whole seconds.
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("6th request: Retry-After %q, want 2", got)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("6th request: body %q: %v", w.Body, err)
	}
	if body["error"] != "too many requests" {
		t.Errorf("6th request: body %v", body)
	}

	if w := get(h, "192.0.2.2", ""); w.Code != http.StatusOK {
		t.Errorf("another IP: status %d, want 200", w.Code)
	}
}

func TestAPIKeySharedAcrossIPs(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t)

	// 100 requests a minute per key: 20 IPs × 5 use it up.
	for i := range 100 {
		ip := fmt.Sprintf("198.51.100.%d", i/5)
		if w := get(h, ip, "k1"); w.Code != http.StatusOK {
			t.Fatalf("request %d from %s: status %d, want 200", i+1, ip, w.Code)
		}
	}
	w := get(h, "198.51.100.200", "k1")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("101st request with the key: status %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60", got)
	}
	// The denial consumed nothing: the fresh IP still has its 5.
	for i := range 5 {
		if w := get(h, "198.51.100.200", ""); w.Code != http.StatusOK {
			t.Fatalf("request %d without a key: status %d, want 200", i+1, w.Code)
		}
	}
	if w := get(h, "198.51.100.201", "k2"); w.Code != http.StatusOK {
		t.Errorf("another key: status %d, want 200", w.Code)
	}
}
