package rls

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestJSONHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Headers: HeadersEnvoy}, apiDomain())
	none := newFixture(t, Options{})
	h := f.svc.JSONHandler(1024)
	post := func(h http.Handler, method, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/json", strings.NewReader(body)))
		return rec
	}
	login := `{"domain":"api","descriptors":[{"entries":[{"key":"path","value":"/login"}]}]}`
	for i, want := range []int{200, 200, 429} {
		rec := post(h, "POST", login)
		if rec.Code != want || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("request %d: %d %s, want %d", i, rec.Code, rec.Header().Get("Content-Type"), want)
		}
		var resp pb.RateLimitResponse
		if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("response %q: %v", rec.Body, err)
		}
		if (want == 429) != (resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT) || len(resp.Statuses) != 1 || resp.ResponseHeadersToAdd == nil {
			t.Fatalf("request %d: %v", i, &resp)
		}
	}
	for _, tc := range []struct {
		name   string
		h      http.Handler
		method string
		body   string
		code   int
		detail string
	}{
		{"malformed JSON", h, "POST", `{"domain":`, 400, "malformed RateLimitRequest"},
		{"not JSON", h, "POST", `hello`, 400, "malformed RateLimitRequest"},
		{"unknown field", h, "POST", `{"domain":"api","nope":1}`, 400, "malformed RateLimitRequest"},
		{"wrong type", h, "POST", `{"domain":"api","descriptors":"x"}`, 400, "malformed RateLimitRequest"},
		{"empty body", h, "POST", ``, 400, "malformed RateLimitRequest"},
		{"empty object", h, "POST", `{}`, 400, "empty domain"},
		{"empty domain", h, "POST", `{"descriptors":[{"entries":[{"key":"k"}]}]}`, 400, "empty domain"},
		{"no descriptors", h, "POST", `{"domain":"api"}`, 400, "no descriptors"},
		{"no entries", h, "POST", `{"domain":"api","descriptors":[{}]}`, 400, "descriptor 0 has no entries"},
		{"empty key", h, "POST", `{"domain":"api","descriptors":[{"entries":[{"value":"v"}]}]}`, 400, "empty key"},
		{"oversized", h, "POST", `{"domain":"` + strings.Repeat("a", 2000) + `"}`, 413, "larger than 1024 bytes"},
		{"GET", h, "GET", ``, 405, "POST"},
		{"no config", none.svc.JSONHandler(0), "POST", login, 503, "no configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(tc.h, tc.method, tc.body)
			if rec.Code != tc.code || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s, want %d problem+json", rec.Code, rec.Header().Get("Content-Type"), tc.code)
			}
			var p problem
			b, _ := io.ReadAll(rec.Body)
			if err := json.Unmarshal(b, &p); err != nil || p.Status != tc.code || p.Title == "" || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("problem %s (%v), want status %d and a detail with %q", b, err, tc.code, tc.detail)
			}
		})
	}
}
