package rls

import (
	"testing"

	"github.com/redlimit/redlimit/ratelimitfield"
)

// TestHeaderNames: Options.HeaderNames renames the fields the response
// asks Envoy to add (envoyproxy/ratelimit's LIMIT_*_HEADER); others keep
// their names.
func TestHeaderNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Headers: ratelimitfield.Envoy, HeaderNames: map[string]string{
		ratelimitfield.HeaderRateLimitLimit: "X-Limit", ratelimitfield.HeaderRateLimitReset: "X-Reset"}}, apiDomain())
	req := request("api", desc("path", "/login"))
	f.do(req)
	want := map[string]string{"X-Limit": "2", ratelimitfield.HeaderRateLimitRemaining: "0", "X-Reset": "60"}
	if h := headerMap(f.do(req)); !mapsEqual(h, want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	if _, err := New(Options{Limiter: f.svc.opts.Limiter, HeaderNames: map[string]string{ratelimitfield.HeaderRateLimitLimit: "bad name"}}); err == nil {
		t.Error("a header name with a space: no error")
	}
}
