package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// rateLimitHeaders is what a response's rate-limit fields say, parsed.
type rateLimitHeaders struct {
	policies []ratelimitfield.QuotaPolicy
	limits   []ratelimitfield.ServiceLimit
	xLimit   int64
	xRemain  int64
	xReset   int64
}

func parseHeaders(t *testing.T, h http.Header) rateLimitHeaders {
	t.Helper()
	var out rateLimitHeaders
	var err error
	if out.policies, err = ratelimitfield.ParseRateLimitPolicy(h.Values(ratelimitfield.HeaderRateLimitPolicy)); err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values(ratelimitfield.HeaderRateLimitPolicy), err)
	}
	if out.limits, err = ratelimitfield.ParseRateLimit(h.Values(ratelimitfield.HeaderRateLimit)); err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values(ratelimitfield.HeaderRateLimit), err)
	}
	for name, p := range map[string]*int64{
		ratelimitfield.HeaderXRateLimitLimit:     &out.xLimit,
		ratelimitfield.HeaderXRateLimitRemaining: &out.xRemain,
		ratelimitfield.HeaderXRateLimitReset:     &out.xReset,
	} {
		if *p, err = strconv.ParseInt(h.Get(name), 10, 64); err != nil {
			t.Fatalf("%s %q: %v", name, h.Get(name), err)
		}
	}
	return out
}

// TestHeadersParseBack checks that the rate-limit fields, parsed back, give
// the numbers the limiter holds, for the rule closest to running out.
func TestHeadersParseBack(t *testing.T) {
	t.Parallel()
	ipLimit := redlimit.PerMinute(20).SlidingLog()
	userLimit := redlimit.Per(4, time.Hour).FixedWindow()
	clock := fixedNow()
	for _, st := range testStores(t, clock) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			m := mustNew(t, st.lim, httplimit.Options{},
				httplimit.Rule{Name: "ip", Limit: ipLimit, Key: httplimit.RemoteIP},
				httplimit.Rule{Name: "user", Limit: userLimit, Key: httplimit.Header("X-User")})
			srv := serve(t, m.Handle(okHandler()))

			// Requests without a user answer to the ip rule only; with one,
			// to both, and the headers follow whichever is tighter.
			for i := range 12 {
				var hdr []string
				if i >= 6 {
					hdr = []string{"X-User", "u1"}
				}
				resp, body := get(t, srv.URL, hdr...)
				h := parseHeaders(t, resp.Header)

				ip := st.lim.peek(t, "ip:127.0.0.1", ipLimit)
				user := st.lim.peek(t, "user:u1", userLimit)
				// What remains now is one more than Peek leaves after one more
				// request, if that one more would pass.
				now := func(r redlimit.Result) int64 {
					if r.Allowed {
						return r.Remaining + 1
					}
					return 0
				}
				wantPolicies := []ratelimitfield.QuotaPolicy{{Name: "ip", Quota: 20, Window: time.Minute}}
				if hdr != nil {
					wantPolicies = append(wantPolicies, ratelimitfield.QuotaPolicy{Name: "user", Quota: 4, Window: time.Hour})
				}
				if fmt.Sprint(h.policies) != fmt.Sprint(wantPolicies) {
					t.Errorf("request %d: RateLimit-Policy %+v, want %+v", i+1, h.policies, wantPolicies)
				}
				if len(h.limits) != 1 {
					t.Fatalf("request %d: RateLimit %+v, want one item", i+1, h.limits)
				}
				tight, tightLimit, tightRes := "ip", ipLimit, ip
				if hdr != nil && float64(now(user))/4 < float64(now(ip))/20 {
					tight, tightLimit, tightRes = "user", userLimit, user
				}
				got := h.limits[0]
				if got.Name != tight || got.Remaining != now(tightRes) || h.xRemain != now(tightRes) || h.xLimit != tightLimit.Max() {
					t.Errorf("request %d (%d): RateLimit %+v, X-RateLimit-Limit %d, -Remaining %d; want %s with %d of %d left",
						i+1, resp.StatusCode, got, h.xLimit, h.xRemain, tight, now(tightRes), tightLimit.Max())
				}
				// The clock stands still: the sliding log's entries all expire a
				// minute on, and the fixed window ends on the hour.
				wantReset := int64(60)
				if tight == "user" {
					wantReset = int64((time.Hour - time.Duration(clock().UnixNano())%time.Hour + time.Second - 1) / time.Second)
					if resp.StatusCode == http.StatusTooManyRequests {
						wantReset = int64((tightRes.RetryAfter + time.Second - 1) / time.Second)
					}
				}
				if got.Reset != time.Duration(wantReset)*time.Second || h.xReset != wantReset {
					t.Errorf("request %d: t=%v, X-RateLimit-Reset %d; want %d", i+1, got.Reset, h.xReset, wantReset)
				}

				wantStatus := http.StatusOK
				if i >= 10 { // user u1 is at 4 of 4 after request 10
					wantStatus = http.StatusTooManyRequests
				}
				if resp.StatusCode != wantStatus {
					t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, wantStatus)
				}
				if wantStatus == http.StatusTooManyRequests {
					p := decodeProblem(t, resp, body)
					ra, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
					if p.Status != 429 || p.Type != httplimit.ProblemTypeQuotaExceeded || p.Limit != "user" ||
						fmt.Sprint(p.ViolatedPolicies) != "[user]" || p.RetryAfterSeconds != ra || ra != wantReset || p.Detail == "" || p.Title == "" {
						t.Errorf("request %d: Retry-After %d, problem %+v", i+1, ra, p)
					}
				}
			}
		})
	}
}

func TestHeaderSelection(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	tests := []struct {
		headers     ratelimitfield.Style
		draft, xhdr bool
	}{
		{ratelimitfield.All, true, true},
		{ratelimitfield.Draft, true, false},
		{ratelimitfield.X, false, true},
		{ratelimitfield.None, false, false},
	}
	for i, tt := range tests {
		m := mustNew(t, lim, httplimit.Options{Headers: tt.headers},
			httplimit.Rule{Name: fmt.Sprintf("r%d", i), Limit: redlimit.PerHour(1), Key: httplimit.RemoteIP})
		srv := serve(t, m.Handle(okHandler()))
		for _, status := range []int{200, 429} {
			resp, _ := get(t, srv.URL)
			if resp.StatusCode != status {
				t.Fatalf("Headers %d: status %d, want %d", tt.headers, resp.StatusCode, status)
			}
			h := resp.Header
			if got := h.Get("RateLimit") != "" && h.Get("RateLimit-Policy") != ""; got != tt.draft {
				t.Errorf("Headers %d, status %d: draft fields %v, want %v", tt.headers, status, got, tt.draft)
			}
			if got := h.Get("X-RateLimit-Limit") != "" && h.Get("X-RateLimit-Remaining") != "" && h.Get("X-RateLimit-Reset") != ""; got != tt.xhdr {
				t.Errorf("Headers %d, status %d: X- fields %v, want %v", tt.headers, status, got, tt.xhdr)
			}
			if got := h.Get("Retry-After") != ""; got != (status == 429) {
				t.Errorf("Headers %d, status %d: Retry-After %q", tt.headers, status, h.Get("Retry-After"))
			}
		}
	}
}

// TestMultiLimitDenialConsumesNothing checks, in the store itself, that a
// request denied by one of its limits consumes none of the others.
func TestMultiLimitDenialConsumesNothing(t *testing.T) {
	t.Parallel()
	ipLimit := redlimit.PerMinute(10).SlidingLog()
	userLimit := redlimit.PerMinute(2).FixedWindow()
	routeLimit := redlimit.PerMinute(100).TokenBucket(50)
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			m := mustNew(t, st.lim, httplimit.Options{},
				httplimit.Rule{Name: "ip", Limit: ipLimit, Key: httplimit.RemoteIP},
				httplimit.Rule{Name: "user", Limit: userLimit, Key: httplimit.Header("X-User")},
				httplimit.Rule{Name: "route", Limit: routeLimit, Key: httplimit.Route})
			mux := http.NewServeMux()
			mux.Handle("GET /items/{id}", m.Handle(okHandler()))
			srv := serve(t, mux)

			check := func(when string, ipLeft, u1Left, routeLeft int64) {
				t.Helper()
				for _, c := range []struct {
					key   string
					limit redlimit.Limit
					want  int64
				}{
					{"ip:127.0.0.1", ipLimit, ipLeft},
					{"user:u1", userLimit, u1Left},
					{"route:GET /items/{id}", routeLimit, routeLeft},
				} {
					// Peek leaves one less than what is left now.
					if got := st.lim.peek(t, c.key, c.limit).Remaining + 1; got != c.want && !(c.want == 0 && got == 1) {
						t.Errorf("%s: %s has %d left, want %d", when, c.key, got, c.want)
					}
				}
				if st.redis == nil {
					return
				}
				// And in Redis itself: the sliding log's members name the
				// units admitted through them (the first is its base, "b"),
				// the fixed window's hash counts them.
				keys := st.redisKeys(t, "{ip:127.0.0.1}:sl:")
				if len(keys) != 1 {
					t.Fatalf("%s: ip keys %q", when, keys)
				}
				out, err := st.redis.Do("EVAL", `local m = redis.call('ZRANGE', KEYS[1], 0, -1)
return tonumber(m[#m]) - (tonumber(m[1]) or 0)`, "1", keys[0])
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprint(10 - ipLeft); out != want {
					t.Errorf("%s: sliding log %s holds %s, want %s", when, keys[0], out, want)
				}
				keys = st.redisKeys(t, "{user:u1}:fw:")
				if len(keys) != 1 {
					t.Fatalf("%s: user keys %q", when, keys)
				}
				if out, err = st.redis.Do("HVALS", keys[0]); err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprint(2 - u1Left); out != want {
					t.Errorf("%s: GET %s = %s, want %s", when, keys[0], out, want)
				}
			}

			for i := range 2 {
				if resp, _ := get(t, srv.URL+"/items/"+strconv.Itoa(i), "X-User", "u1"); resp.StatusCode != 200 {
					t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
				}
			}
			check("after 2 requests", 8, 0, 50-2)
			for i := range 3 {
				resp, body := get(t, srv.URL+"/items/9", "X-User", "u1")
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("denied request %d: status %d", i+1, resp.StatusCode)
				}
				if p := decodeProblem(t, resp, body); fmt.Sprint(p.ViolatedPolicies) != "[user]" {
					t.Errorf("violated %v, want [user]", p.ViolatedPolicies)
				}
			}
			check("after 3 denials", 8, 0, 50-2)
			if resp, _ := get(t, srv.URL+"/items/9", "X-User", "u2"); resp.StatusCode != 200 {
				t.Fatalf("another user: status %d", resp.StatusCode)
			}
			check("after another user", 7, 0, 50-3)
		})
	}
}

// TestShadowNeverBlocks checks that shadow rules count and log, but never
// deny nor show in the headers; and that they do not disturb enforced rules.
func TestShadowNeverBlocks(t *testing.T) {
	t.Parallel()
	enforced := redlimit.PerMinute(100)
	small := redlimit.PerMinute(2).SlidingLog()
	big := redlimit.PerMinute(50)
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			log, buf := newLogger()
			m := mustNew(t, st.lim, httplimit.Options{Logger: log},
				httplimit.Rule{Name: "enforced", Limit: enforced, Key: httplimit.RemoteIP},
				httplimit.Rule{Name: "small", Limit: small, Key: httplimit.RemoteIP, Shadow: true},
				httplimit.Rule{Name: "big", Limit: big, Key: httplimit.RemoteIP, Shadow: true})
			srv := serve(t, m.Handle(okHandler()))
			for i := range 5 {
				resp, _ := get(t, srv.URL)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
				}
				h := parseHeaders(t, resp.Header)
				if len(h.limits) != 1 || h.limits[0].Name != "enforced" || h.limits[0].Remaining != int64(99-i) {
					t.Errorf("request %d: RateLimit %+v, want enforced with %d left", i+1, h.limits, 99-i)
				}
				if len(h.policies) != 1 || h.policies[0].Name != "enforced" {
					t.Errorf("request %d: RateLimit-Policy %+v, want the enforced rule's alone", i+1, h.policies)
				}
				if i >= 2 && resp.Header.Get("Retry-After") != "" {
					t.Errorf("request %d: Retry-After on a served request", i+1)
				}
			}
			// The small shadow rule denied 3 requests: the big one counted
			// all 5, as if it alone were added to the enforced rule.
			for _, c := range []struct {
				key   string
				limit redlimit.Limit
				want  int64
			}{{"enforced:127.0.0.1", enforced, 95}, {"small:127.0.0.1", small, 0}, {"big:127.0.0.1", big, 45}} {
				if got := st.lim.peek(t, c.key, c.limit); got.Remaining+1 != c.want && !(c.want == 0 && !got.Allowed) {
					t.Errorf("%s: %+v, want %d left", c.key, got, c.want)
				}
			}
			if n := strings.Count(buf.String(), "shadow rule would deny"); n != 3 {
				t.Errorf("%d shadow denials logged, want 3:\n%s", n, buf)
			}
			if !strings.Contains(buf.String(), "rule=small") || strings.Contains(buf.String(), "rule=big") {
				t.Errorf("log names the wrong rules:\n%s", buf)
			}
		})
	}
}

// TestShadowNotCountedOnDenial checks that a request the enforced rules deny
// is not counted by the shadow rules: it was not served.
func TestShadowNotCountedOnDenial(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	shadow := redlimit.PerMinute(10)
	m := mustNew(t, lim, httplimit.Options{},
		httplimit.Rule{Name: "enforced", Limit: redlimit.PerMinute(1), Key: httplimit.RemoteIP},
		httplimit.Rule{Name: "shadow", Limit: shadow, Key: httplimit.RemoteIP, Shadow: true})
	srv := serve(t, m.Handle(okHandler()))
	for i, want := range []int{200, 429, 429} {
		if resp, _ := get(t, srv.URL); resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if res, _ := lim.Peek(context.Background(), "shadow:127.0.0.1", shadow, 1); res.Remaining != 8 {
		t.Errorf("shadow rule: %d left after one more, want 8 (one request counted)", res.Remaining)
	}
}

func TestKeyErrors(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	boom := errors.New("boom")
	tests := []struct {
		name   string
		key    httplimit.KeyFunc
		opts   httplimit.Options
		status int
		rated  bool // rate-limit fields expected
	}{
		{name: "error", key: func(*http.Request) (string, error) { return "", boom }, status: 400},
		{name: "empty key", key: func(*http.Request) (string, error) { return "", nil }, status: 400},
		{name: "no key skips the rule", key: httplimit.Header("X-Missing"), status: 200},
		{name: "no user skips the rule", key: httplimit.User, status: 200},
		{name: "fallback", key: httplimit.Or(httplimit.Header("X-Missing"), httplimit.Static("anon")), status: 200, rated: true},
		{name: "OnError", key: func(*http.Request) (string, error) { return "", boom },
			opts: httplimit.Options{OnError: func(w http.ResponseWriter, r *http.Request, err error) {
				var ke *httplimit.KeyError
				if errors.As(err, &ke) && errors.Is(err, boom) && ke.Rule == "OnError" {
					w.WriteHeader(http.StatusTeapot)
				}
			}}, status: http.StatusTeapot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			tt.opts.Logger = log
			name := strings.ReplaceAll(tt.name, " ", "-")
			m := mustNew(t, lim, tt.opts, httplimit.Rule{Name: name, Limit: redlimit.PerMinute(5), Key: tt.key})
			resp, body := get(t, serve(t, m.Handle(okHandler())).URL)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("RateLimit") != ""; got != tt.rated {
				t.Errorf("RateLimit %q, want it set: %v", resp.Header.Get("RateLimit"), tt.rated)
			}
			if tt.status == 400 {
				p := decodeProblem(t, resp, body)
				if p.Status != 400 || !strings.Contains(p.Detail, name) || strings.Contains(p.Detail, "boom") {
					t.Errorf("problem %+v", p)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	ok := httplimit.Rule{Name: "ok", Limit: redlimit.PerSecond(1), Key: httplimit.RemoteIP}
	with := func(f func(*httplimit.Rule)) httplimit.Rule { r := ok; f(&r); return r }
	many := make([]httplimit.Rule, redlimit.MaxRequests+1)
	for i := range many {
		many[i] = with(func(r *httplimit.Rule) { r.Name = fmt.Sprint("r", i) })
	}
	tests := []struct {
		name  string
		lim   redlimit.Limiter
		opts  httplimit.Options
		rules []httplimit.Rule
		is    error
	}{
		{name: "nil limiter", rules: []httplimit.Rule{ok}},
		{name: "no rules", lim: lim, is: httplimit.ErrNoRules},
		{name: "zero limit", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Limit = redlimit.Limit{} })}, is: redlimit.ErrUnknownAlgorithm},
		{name: "zero count", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Limit = redlimit.PerSecond(0) })}, is: redlimit.ErrInvalidLimit},
		{name: "bad burst", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Limit = redlimit.PerSecond(1).TokenBucket(0) })}, is: redlimit.ErrInvalidBurst},
		{name: "empty name", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Name = "" })}, is: httplimit.ErrInvalidRule},
		{name: "name with colon", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Name = "a:b" })}, is: httplimit.ErrInvalidRule},
		{name: "name with quote", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Name = `a"b` })}, is: httplimit.ErrInvalidRule},
		{name: "long name", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Name = strings.Repeat("a", 65) })}, is: httplimit.ErrInvalidRule},
		{name: "duplicate name", lim: lim, rules: []httplimit.Rule{ok, ok}, is: httplimit.ErrInvalidRule},
		{name: "no key", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Key = nil })}, is: httplimit.ErrInvalidRule},
		{name: "negative cost", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Cost = -1 })}, is: httplimit.ErrInvalidRule},
		{name: "cost above max", lim: lim, rules: []httplimit.Rule{with(func(r *httplimit.Rule) { r.Cost = 2 })}, is: httplimit.ErrInvalidRule},
		{name: "too many rules", lim: lim, rules: many, is: httplimit.ErrInvalidRule},
		{name: "bad headers", lim: lim, opts: httplimit.Options{Headers: 9}, rules: []httplimit.Rule{ok}},
	}
	for _, tt := range tests {
		m, err := httplimit.New(tt.lim, tt.opts, tt.rules...)
		if err == nil || m != nil {
			t.Errorf("%s: New = %v, %v; want an error", tt.name, m, err)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: %v, want errors.Is %v", tt.name, err, tt.is)
		}
	}
}

// TestLimiterFailure checks fail open (the default) and FailClosed, with a
// closed memory store and with a Redis server that has been killed.
func TestLimiterFailure(t *testing.T) {
	t.Parallel()
	closed, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	srv := redistest.Start(t)
	rs := redisStoreAt(t, srv.Addr())
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		lim  redlimit.Limiter
	}{{"closed memory", closed}, {"dead redis", rs}} {
		for _, failClosed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/FailClosed=%v", c.name, failClosed), func(t *testing.T) {
				t.Parallel()
				log, buf := newLogger()
				m := mustNew(t, c.lim, httplimit.Options{FailClosed: failClosed, Logger: log},
					httplimit.Rule{Name: "ip", Limit: redlimit.PerSecond(1), Key: httplimit.RemoteIP})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, serve(t, m.Handle(okHandler())).URL, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				want := http.StatusOK
				if failClosed {
					want = http.StatusServiceUnavailable
				}
				if resp.StatusCode != want {
					t.Errorf("status %d, want %d", resp.StatusCode, want)
				}
				if !strings.Contains(buf.String(), "limiter failed") {
					t.Errorf("error not logged:\n%s", buf)
				}
			})
		}
	}
}

// neverLimiter denies everything with RetryAfter Never, as a store does for
// a cost above the limit's capacity.
type neverLimiter struct{ redlimit.Limiter }

func (neverLimiter) AllowAll(_ context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	d := redlimit.Decision{}
	for _, r := range reqs {
		d.Results = append(d.Results, redlimit.Result{Max: r.Limit.Max(), RetryAfter: redlimit.Never})
	}
	return d, nil
}

func TestDeniedForever(t *testing.T) {
	t.Parallel()
	m := mustNew(t, neverLimiter{}, httplimit.Options{},
		httplimit.Rule{Name: "ip", Limit: redlimit.PerSecond(1), Key: httplimit.RemoteIP})
	resp, body := get(t, serve(t, m.Handle(okHandler())).URL)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Reset") != "" {
		t.Errorf("status %d, Retry-After %q, X-RateLimit-Reset %q; want 429 without either",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Reset"))
	}
	if got := resp.Header.Get("RateLimit"); got != `"ip";r=0` {
		t.Errorf("RateLimit %q", got)
	}
	if p := decodeProblem(t, resp, body); p.RetryAfterSeconds != 0 || !strings.Contains(p.Detail, "ever") {
		t.Errorf("problem %+v", p)
	}
}

func TestOnDenied(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	var got httplimit.Denial
	m := mustNew(t, lim, httplimit.Options{OnDenied: func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
		got = d
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "slow down, %s", d.Rule)
	}}, httplimit.Rule{Name: "hourly", Limit: redlimit.PerHour(1), Key: httplimit.RemoteIP})
	srv := serve(t, m.Handle(okHandler()))
	get(t, srv.URL)
	resp, body := get(t, srv.URL)
	if resp.StatusCode != 503 || string(body) != "slow down, hourly" || resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit") == "" {
		t.Errorf("status %d, body %q, headers %v", resp.StatusCode, body, resp.Header)
	}
	if got.Rule != "hourly" || got.Limit != redlimit.PerHour(1) || got.Result.Allowed || got.RetryAfter <= 0 || fmt.Sprint(got.Violated) != "[hourly]" {
		t.Errorf("denial %+v", got)
	}
}
