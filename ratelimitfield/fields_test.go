package ratelimitfield_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

func TestParseRateLimitPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lines []string
		want  []ratelimitfield.QuotaPolicy
	}{
		// Examples of draft-ietf-httpapi-ratelimit-headers-10, Section 3.
		{[]string{`"burst";q=100;w=60,"daily";q=1000;w=86400`}, []ratelimitfield.QuotaPolicy{
			{Name: "burst", Quota: 100, Window: time.Minute}, {Name: "daily", Quota: 1000, Window: 24 * time.Hour}}},
		{[]string{`"default";q=100;w=10`}, []ratelimitfield.QuotaPolicy{{Name: "default", Quota: 100, Window: 10 * time.Second}}},
		{[]string{`"peruser";q=100;w=60;pk=:cHsdsRa894==:`}, []ratelimitfield.QuotaPolicy{{Name: "peruser", Quota: 100, Window: time.Minute}}},
		{[]string{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`}, []ratelimitfield.QuotaPolicy{{Name: "peruser", Quota: 65535, Window: 10 * time.Second}}},
		// Split over lines, with a token name (earlier drafts) and no window.
		{[]string{`"permin";q=50;w=60`, `  perhr;q=1000 `}, []ratelimitfield.QuotaPolicy{
			{Name: "permin", Quota: 50, Window: time.Minute}, {Name: "perhr", Quota: 1000}}},
		{[]string{`"a\"b";q=1;acme-x=?1;y=1.5`}, []ratelimitfield.QuotaPolicy{{Name: `a"b`, Quota: 1}}},
		{[]string{`"a";q=1;w=999999999999999`}, []ratelimitfield.QuotaPolicy{{Name: "a", Quota: 1, Window: math.MaxInt64}}},
	}
	for _, tt := range tests {
		got, err := ratelimitfield.ParseRateLimitPolicy(tt.lines)
		if err != nil {
			t.Errorf("ParseRateLimitPolicy(%q): %v", tt.lines, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseRateLimitPolicy(%q) = %+v, want %+v", tt.lines, got, tt.want)
		}
	}
}

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lines []string
		want  []ratelimitfield.ServiceLimit
	}{
		// Examples of draft-ietf-httpapi-ratelimit-headers-10, Section 4.
		{[]string{`"default";r=50;t=30`}, []ratelimitfield.ServiceLimit{{Name: "default", Remaining: 50, Reset: 30 * time.Second}}},
		{[]string{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`}, []ratelimitfield.ServiceLimit{{Name: "default", Remaining: 999, Reset: -1}}},
		{[]string{`"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`}, []ratelimitfield.ServiceLimit{{Name: "default", Remaining: 300000000, Reset: time.Minute}}},
		{[]string{`"a";r=0;t=0, "b";r=1`}, []ratelimitfield.ServiceLimit{{Name: "a", Remaining: 0, Reset: 0}, {Name: "b", Remaining: 1, Reset: -1}}},
		// Past the largest Duration (292 years): the largest Duration, not a wrap.
		{[]string{`"a";r=0;t=9223372037`}, []ratelimitfield.ServiceLimit{{Name: "a", Reset: math.MaxInt64}}},
		{[]string{`"a";r=0;t=999999999999999`}, []ratelimitfield.ServiceLimit{{Name: "a", Reset: math.MaxInt64}}},
		{[]string{`"a";r=0;t=9223372036`}, []ratelimitfield.ServiceLimit{{Name: "a", Reset: 9223372036 * time.Second}}},
	}
	for _, tt := range tests {
		got, err := ratelimitfield.ParseRateLimit(tt.lines)
		if err != nil {
			t.Errorf("ParseRateLimit(%q): %v", tt.lines, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseRateLimit(%q) = %+v, want %+v", tt.lines, got, tt.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()
	for _, v := range []string{
		``, // parses to an empty list: not an error, see below
		`"a";r=-1`,
		`"a";t=1`,
		`"a";r=1.5`,
		`"a";r="1"`,
		`"a";r=1;t=-2`,
		`1;r=1`,
		`"a";r=1,`,
		`"a";r=1,,"b";r=1`,
		`("a" "b");r=1`,
		`"a;r=1`,
		`"a";R=1`,
		`"a";r=1 x`,
		`"a";r=1234567890123456`,
		"\"a\u00e9\";r=1",
		`"a";r=:!!:`,
	} {
		got, err := ratelimitfield.ParseRateLimit([]string{v})
		if v == "" {
			if err != nil || len(got) != 0 {
				t.Errorf("ParseRateLimit(%q) = %v, %v; want nothing", v, got, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseRateLimit(%q) = %+v, want an error", v, got)
		}
	}
	for _, v := range []string{`"a";w=60`, `"a";q=1;w=0`, `"a";q=-1`, `"a";q=1;w=1.0`} {
		if got, err := ratelimitfield.ParseRateLimitPolicy([]string{v}); err == nil {
			t.Errorf("ParseRateLimitPolicy(%q) = %+v, want an error", v, got)
		}
	}
}

func TestFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit  redlimit.Limit
		res    redlimit.Result
		policy string
		rl     string
	}{
		{redlimit.PerMinute(100), redlimit.Result{Allowed: true, Max: 100, Remaining: 42, ResetAfter: 16*time.Second + time.Millisecond},
			`"peruser";q=100;w=60`, `"peruser";r=42;t=17`},
		{redlimit.PerSecond(10).TokenBucket(20), redlimit.Result{Allowed: true, Max: 20, Remaining: 19, ResetAfter: 100 * time.Millisecond},
			`"peruser";q=10;w=1`, `"peruser";r=19;t=1`},
		{redlimit.Per(5, 200*time.Millisecond).SlidingLog(), redlimit.Result{Allowed: false, Max: 5, RetryAfter: 150 * time.Millisecond, ResetAfter: 190 * time.Millisecond},
			`"peruser";q=5`, `"peruser";r=0;t=1`},
		{redlimit.PerHour(3), redlimit.Result{Allowed: false, Max: 3, RetryAfter: 20 * time.Minute, ResetAfter: time.Hour},
			`"peruser";q=3;w=3600`, `"peruser";r=0;t=1200`},
		{redlimit.PerHour(3), redlimit.Result{Allowed: false, Max: 3, RetryAfter: redlimit.Never},
			`"peruser";q=3;w=3600`, `"peruser";r=0`},
		{redlimit.PerDay(3), redlimit.Result{Allowed: true, Max: 3, Remaining: 3},
			`"peruser";q=3;w=86400`, `"peruser";r=3;t=0`},
	}
	for _, tt := range tests {
		p := ratelimitfield.PolicyOf("peruser", tt.limit)
		if got := p.String(); got != tt.policy {
			t.Errorf("PolicyOf(%s) = %s, want %s", tt.limit, got, tt.policy)
		}
		l := ratelimitfield.ServiceLimitOf("peruser", tt.res)
		if got := l.String(); got != tt.rl {
			t.Errorf("ServiceLimitOf(%+v) = %s, want %s", tt.res, got, tt.rl)
		}
		ps, err := ratelimitfield.ParseRateLimitPolicy([]string{p.String()})
		if err != nil || len(ps) != 1 || ps[0] != p {
			t.Errorf("policy %s parses back to %+v, %v; want %+v", p, ps, err, p)
		}
		ls, err := ratelimitfield.ParseRateLimit([]string{l.String()})
		if err != nil || len(ls) != 1 || ls[0] != l {
			t.Errorf("limit %s parses back to %+v, %v; want %+v", l, ls, err, l)
		}
	}
}
