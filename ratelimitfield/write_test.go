package ratelimitfield_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// TestWrite checks the fields of each style for a set of quotas: the policy
// of every quota once, the others from the tightest.
func TestWrite(t *testing.T) {
	t.Parallel()
	user := ratelimitfield.Quota{Name: "user", Limit: redlimit.PerHour(10),
		Result: redlimit.Result{Allowed: true, Max: 10, Remaining: 8, ResetAfter: 12 * time.Minute}}
	login := ratelimitfield.Quota{Name: "login", Limit: redlimit.PerMinute(2).SlidingLog(),
		Result: redlimit.Result{Allowed: true, Max: 2, Remaining: 0, ResetAfter: 59*time.Second + time.Millisecond}}
	denied := login
	denied.Result = redlimit.Result{Max: 2, RetryAfter: 30 * time.Second, ResetAfter: time.Minute}
	never := login
	never.Result = redlimit.Result{Max: 2, RetryAfter: redlimit.Never, ResetAfter: time.Minute}
	bucket := ratelimitfield.Quota{Name: "tb", Limit: redlimit.PerSecond(10).TokenBucket(20),
		Result: redlimit.Result{Allowed: true, Max: 20, Remaining: 0, ResetAfter: 2 * time.Second}}
	for _, tt := range []struct {
		style  ratelimitfield.Style
		quotas []ratelimitfield.Quota
		want   map[string]string
	}{
		{ratelimitfield.All, []ratelimitfield.Quota{user, login}, map[string]string{
			"RateLimit-Policy": `"user";q=10;w=3600, "login";q=2;w=60`, "RateLimit": `"login";r=0;t=60`,
			"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60"}},
		{ratelimitfield.Draft, []ratelimitfield.Quota{user, denied}, map[string]string{
			"RateLimit-Policy": `"user";q=10;w=3600, "login";q=2;w=60`, "RateLimit": `"login";r=0;t=30`}},
		{ratelimitfield.X, []ratelimitfield.Quota{denied, user}, map[string]string{
			"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "30"}},
		{ratelimitfield.Envoy, []ratelimitfield.Quota{user, bucket}, map[string]string{
			"RateLimit-Limit": "10", "RateLimit-Remaining": "0", "RateLimit-Reset": "2"}},
		// A request that can never pass has no reset.
		{ratelimitfield.All, []ratelimitfield.Quota{never}, map[string]string{
			"RateLimit-Policy": `"login";q=2;w=60`, "RateLimit": `"login";r=0`,
			"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0"}},
		{ratelimitfield.Envoy, []ratelimitfield.Quota{never}, map[string]string{
			"RateLimit-Limit": "2", "RateLimit-Remaining": "0"}},
		// Two quotas of one name: one policy.
		{ratelimitfield.Draft, []ratelimitfield.Quota{login, login}, map[string]string{
			"RateLimit-Policy": `"login";q=2;w=60`, "RateLimit": `"login";r=0;t=60`}},
		{ratelimitfield.None, []ratelimitfield.Quota{user}, map[string]string{}},
		{ratelimitfield.All, nil, map[string]string{}},
		{ratelimitfield.Style(9), []ratelimitfield.Quota{user}, map[string]string{}},
	} {
		got := map[string]string{}
		tt.style.Write(tt.quotas, func(name, value string) {
			if _, dup := got[name]; dup {
				t.Errorf("%s: %s set twice", tt.style, name)
			}
			got[name] = value
		})
		if !maps.Equal(got, tt.want) {
			t.Errorf("%s of %d quotas: %v, want %v", tt.style, len(tt.quotas), got, tt.want)
		}
	}
}

func TestStyleNames(t *testing.T) {
	t.Parallel()
	for s := ratelimitfield.All; s.Valid(); s++ {
		got, err := ratelimitfield.ParseStyle(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStyle(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	for name, want := range map[string]ratelimitfield.Style{"IETF": ratelimitfield.Draft, " off ": ratelimitfield.None, "x": ratelimitfield.X} {
		if got, err := ratelimitfield.ParseStyle(name); err != nil || got != want {
			t.Errorf("ParseStyle(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ratelimitfield.ParseStyle("fancy"); err == nil {
		t.Error("ParseStyle(fancy): no error")
	}
	if s := ratelimitfield.Style(9).String(); s != "Style(9)" {
		t.Errorf("String of an unknown style: %q", s)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string // "": none
	}{
		{-time.Second, ""}, {0, ""}, {redlimit.Never, ""},
		{time.Nanosecond, "1"}, {time.Second, "1"}, {time.Second + 1, "2"}, {90 * time.Second, "90"},
	} {
		got, ok := ratelimitfield.RetryAfterValue(c.d)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("RetryAfterValue(%v) = %q, %v; want %q", c.d, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{{-time.Second, 1}, {0, 1}, {time.Nanosecond, 1}, {time.Second + 1, 2}} {
		if got := ratelimitfield.RetryAfterSeconds(c.d); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Write describes the limit closest to running out, whatever carries the
// fields: here a map standing in for HTTP headers or gRPC metadata.
func ExampleStyle_Write() {
	quotas := []ratelimitfield.Quota{
		{Name: "ip", Limit: redlimit.PerSecond(10), Result: redlimit.Result{Allowed: true, Max: 10, Remaining: 9, ResetAfter: time.Second}},
		{Name: "key", Limit: redlimit.PerMinute(1000), Result: redlimit.Result{Allowed: true, Max: 1000, Remaining: 20, ResetAfter: time.Minute}},
	}
	ratelimitfield.Draft.Write(quotas, func(name, value string) { fmt.Printf("%s: %s\n", name, value) })
	// Output:
	// RateLimit-Policy: "ip";q=10;w=1, "key";q=1000;w=60
	// RateLimit: "key";r=20;t=60
}

// ParseRateLimit reads the RateLimit field back, as a client would.
func ExampleParseRateLimit() {
	limits, err := ratelimitfield.ParseRateLimit([]string{`"peruser";r=42;t=17`})
	if err != nil {
		panic(err) // a malformed field: ignore it
	}
	for _, l := range limits {
		fmt.Println(l.Name, l.Remaining, l.Reset)
	}
	policies, err := ratelimitfield.ParseRateLimitPolicy([]string{`"peruser";q=100;w=60, "daily";q=1000;w=86400`})
	if err != nil {
		panic(err)
	}
	for _, p := range policies {
		fmt.Println(p.Name, p.Quota, p.Window)
	}
	// Output:
	// peruser 42 17s
	// peruser 100 1m0s
	// daily 1000 24h0m0s
}
