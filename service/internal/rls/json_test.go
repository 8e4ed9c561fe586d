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

	"github.com/redlimit/redlimit/ratelimitfield"
)

func TestJSONHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Headers: ratelimitfield.Envoy}, apiDomain())
	none := newFixture(t, Options{})
	h := f.svc.JSONHandler(1024)
	post := func(h http.Handler, method, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/json", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
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

// A body of more JSON objects than a request within the caps can hold is
// refused before it is decoded: protojson allocated 6.8 MB for 120 KB of
// empty descriptors ({},{},...), which the caps refused only after.
func TestJSONHandlerObjectCap(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]int{
		`{}`:                    1,
		`{"a":"{{{"}`:           1,
		`{"a":"\"{"}`:           1,
		`{"a":"\\"}{`:           2,
		`[{},{"b":[{}]}]`:       3,
		`{"a":"\u007b"}`:        1,
		"{\"a\":\"\\\\\\\"{\"}": 1,
	} {
		if got := jsonObjects([]byte(text)); got != want {
			t.Errorf("jsonObjects(%s) = %d, want %d", text, got, want)
		}
	}
	f := newFixture(t, Options{MaxDescriptors: 2, MaxEntries: 3}, apiDomain())
	h := f.svc.JSONHandler(0)
	post := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/json", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec
	}
	entries := `{"entries":[{"key":"a"},{"key":"b"},{"key":"c"}],"limit":{"requestsPerUnit":1,"unit":"SECOND"}}`
	if rec := post(`{"domain":"api","descriptors":[` + entries + `,` + entries + `]}`); rec.Code != 200 && rec.Code != 429 {
		t.Fatalf("the most objects the caps allow (11): %d %s", rec.Code, rec.Body)
	}
	rec := post(`{"domain":"api","descriptors":[` + entries + `,` + entries + `,{}]}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "12 JSON objects, more than 11") {
		t.Fatalf("one object more: %d %s", rec.Code, rec.Body)
	}
}

// Issue 27: curl -d sends application/x-www-form-urlencoded, and /json
// answered 415. A body that parses as a RateLimitRequest is decided
// whatever its type; cross-site browser requests are the server's to
// refuse (CrossOriginProtection, TestCrossSiteRequests). A body that does
// not parse is 415 when it was not sent as JSON, saying what to send.
func TestJSONHandlerAnyTypeThatParses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, apiDomain())
	h := f.svc.JSONHandler(0)
	post := func(ctype, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/json", strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	login := `{"domain":"api","descriptors":[{"entries":[{"key":"path","value":"/login"}]}]}`
	for i, ctype := range []string{"application/x-www-form-urlencoded", "", "text/plain"} {
		want := []int{200, 200, 429}[i] // the rule is 2 a minute
		if rec := post(ctype, login); rec.Code != want || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q: %d %s, want %d", ctype, rec.Code, rec.Body, want)
		}
	}
	for _, ctype := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		rec := post(ctype, "path=/login")
		var p problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != http.StatusUnsupportedMediaType || err != nil || !strings.Contains(p.Detail, "application/json") {
			t.Errorf("a form sent as %q: %d %s, want 415 naming application/json", ctype, rec.Code, rec.Body)
		}
	}
}
