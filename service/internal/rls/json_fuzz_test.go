package rls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/service/internal/config"
)

// fuzzRules are the rules of the fuzz targets: every algorithm, a nested
// descriptor, a wildcard, a block, an unlimited and a shadow rule.
const fuzzRules = `domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: sliding_window}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: path
    value: /docs/*
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// newFuzzService returns a Service with fuzzRules on a memory store whose
// clock stands still.
func newFuzzService(tb testing.TB) *Service {
	tb.Helper()
	d, err := config.Parse("fuzz.yaml", []byte(fuzzRules))
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := config.New(d)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := memory.New(memory.WithClock(redlimittest.NewClock(redlimittest.T0).Now), memory.WithSweepInterval(0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	svc, err := New(Options{Limiter: store, Counting: config.CountingAdmission}) // the debits of auto are not counted yet
	if err != nil {
		tb.Fatal(err)
	}
	svc.SetConfig(cfg)
	return svc
}

// manyDescriptorsJSON returns a request of n descriptors of m entries,
// each limited on a key of its own.
func manyDescriptorsJSON(n, m int) string {
	var b strings.Builder
	b.WriteString(`{"domain":"api","descriptors":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"entries":[{"key":"user","value":"many%d"}`, i)
		for j := 1; j < m; j++ {
			fmt.Fprintf(&b, `,{"key":"k%d","value":"v"}`, j)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// fuzzMaxBody is the body cap of the fuzzed handler: the server's default
// message cap.
const fuzzMaxBody = 128 << 10

// jsonAllocBound is the most bytes one /json request may allocate: 512 KiB
// for the messages the body may hold (at most 2,177 JSON objects with the
// default caps, about 200 bytes each decoded), the decisions and the
// answer, and 8 bytes per byte of body, to read it (up to twice its size
// as the buffer grows) and copy its strings. Measured: 578 KB for 64
// descriptors of 32 entries (a body of 54 KB), 304 KB for a body past the
// 128 KiB cap, under 16 KB for a small request.
func jsonAllocBound(body int) uint64 { return 512<<10 + 8*uint64(body) }

func jsonRequest(ctype string, body []byte) *http.Request {
	req := httptest.NewRequest("POST", "/json", bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	return req
}

// FuzzJSONHandler drives POST /json with any body and Content-Type, as a
// hostile client would: no panic, no 5xx (a bad request is a 4xx problem,
// a good one a 200 or 429 RateLimitResponse), and at most jsonAllocBound
// bytes allocated.
func FuzzJSONHandler(f *testing.F) {
	for _, seed := range []struct{ ctype, body string }{
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"},{"key":"path","value":"/login"}]}]}`},
		{"application/json; charset=utf-8", `{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"acme"}],"hitsAddend":"20"}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u"}],"hitsAddend":1000000000}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"u"}],"hitsAddend":"18446744073709551615"}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"path","value":"/docs/a"}],"limit":{"requestsPerUnit":5,"unit":"SECOND"}}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"v"}],"limit":{"requestsPerUnit":4294967295,"unit":"YEAR","unitMultiplier":4294967295}}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"v"}],"limit":{"requestsPerUnit":1,"unit":"WEEK","unitMultiplier":0}}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"blocked","value":"x"}]},{"entries":[{"key":"free","value":"x"}]},{"entries":[{"key":"shadow","value":"x"}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[` + strings.Repeat(`{"entries":[{"key":"user","value":"w"}]},`, 64) + `{"entries":[{"key":"k"}]}]}`},
		{"application/json", manyDescriptorsJSON(64, 32)},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[` + strings.Repeat(`{"key":"a"},`, 11000) + `{}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[` + strings.Repeat(`{},`, 40000) + `{}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[` + strings.Repeat(`{},`, 40000) + `{}]}`},
		{"application/json", `{"domain":"api","descriptors":[` + strings.Repeat(`{"limit":{}},`, 10000) + `{}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[` + strings.Repeat(`{"key":"a","value":"b"},`, 40) + `{"key":"k"}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"` + strings.Repeat("x", 70000) + `"}]}]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"` + strings.Repeat(`\u0000`, 5000) + `"}]}]}`},
		{"application/json", `{"domain":"` + "\xff\xfe" + `","descriptors":[]}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"","value":"x"}]}]}`},
		{"application/json", `{"domain":"","descriptors":[{"entries":[{"key":"a"}]}]}`},
		{"application/json", `{"domain":"nope","descriptors":[{"entries":[{"key":"a"}]}]}`},
		{"application/json", `{"domain":"api","descriptors":null,"domain":"api"}`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":1e400}]}]}`},
		{"application/json", `[` + strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000) + `]`},
		{"application/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"x"}],"hitsAddend":-1}]}`},
		{"application/json", "\ufeff{}"},
		{"application/json", ""},
		{"application/json", strings.Repeat(" ", 200000)},
		{"text/plain", `{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`},
		{"", `{}`},
		{"application/x-www-form-urlencoded", `domain=api`},
	} {
		f.Add(seed.ctype, []byte(seed.body))
	}
	svc := newFuzzService(f)
	h := svc.JSONHandler(fuzzMaxBody)
	// One request first: the store's first key allocates its tables.
	h.ServeHTTP(httptest.NewRecorder(), jsonRequest("application/json", []byte(`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"warm"}]}]}`)))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		rec, req := httptest.NewRecorder(), jsonRequest(ctype, body)
		n := allocated(func() { h.ServeHTTP(rec, req) })
		if bound := jsonAllocBound(min(len(body), fuzzMaxBody)); n > bound {
			t.Fatalf("%d bytes allocated for a body of %d, more than %d", n, len(body), bound)
		}
		switch code := rec.Code; {
		case code >= 500:
			t.Fatalf("%d for Content-Type %q, body %.300q: %s", code, ctype, body, rec.Body)
		case code == http.StatusOK || code == http.StatusTooManyRequests:
			var resp pb.RateLimitResponse
			if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%d with a body that is no RateLimitResponse: %v\n%s", code, err, rec.Body)
			}
			if (code == http.StatusTooManyRequests) != (resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT) {
				t.Fatalf("%d with overall code %s", code, resp.OverallCode)
			}
		default:
			var p problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != code || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d with no problem details: %v\n%s", code, err, rec.Body)
			}
		}
	})
}
