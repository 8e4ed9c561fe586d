package httplimit_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
	"github.com/redlimit/redlimit/ratelimitfield"
)

var plans = rulesettest.Plans

// tenantPlans says which plan each tenant of the tests is on.
var tenantPlans = map[string]string{"a": "free", "b": "pro", "c": "gold"}

var errUnknownPlan = errors.New("unknown plan")

// planLimit chooses the limit of the request's tenant (X-Tenant) by its plan.
func planLimit(r *http.Request) (redlimit.Limit, error) {
	plan := tenantPlans[r.Header.Get("X-Tenant")]
	l, ok := plans[plan]
	if !ok {
		return redlimit.Limit{}, fmt.Errorf("%w %q", errUnknownPlan, plan)
	}
	return l, nil
}

// tokenCost is the cost the request states in X-Tokens; 1 without one.
func tokenCost(r *http.Request) (int64, error) {
	v := r.Header.Get("X-Tokens")
	if v == "" {
		return 1, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// tierRules are the rules of the tier tests: the tenant's plan, costed by
// tokens, and a rule of its own for one route.
func tierRules() []httplimit.Rule {
	return []httplimit.Rule{
		{Name: "plan", Key: httplimit.Header("X-Tenant"), LimitFunc: planLimit, CostFunc: tokenCost},
		{Name: "chat", Pattern: "POST /v1/chat/{id}", Limit: redlimit.PerMinute(5), Key: httplimit.Header("X-Tenant")},
	}
}

// quiet returns options whose logs go nowhere.
func quiet() httplimit.Options {
	log, _ := newLogger()
	return httplimit.Options{Logger: log}
}

// do sends a request through h and returns its response.
func do(h http.Handler, method, target string, header ...string) *http.Response {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestPerRequestLimitAndCost steps through requests whose limit and cost
// their tenant and tokens choose. A request with bad input gets 400 and
// consumes nothing; a cost above its limit is denied for ever.
func TestPerRequestLimitAndCost(t *testing.T) {
	t.Parallel()
	t0 := time.Now().Truncate(time.Minute) // a window starts: full reset in 120 s
	for _, st := range testStores(t, func() time.Time { return t0 }) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			h := mustNew(t, st.lim, quiet(), tierRules()...).Handle(okHandler())
			for i, c := range []struct {
				method, path, tenant, tokens string
				status                       int
				policy, rateLimit            string
				retryAfter                   string
			}{
				{"GET", "/v1/items", "a", "", 200, `"plan";q=100;w=60`, `"plan";r=99;t=120`, ""},
				{"GET", "/v1/items", "a", "40", 200, `"plan";q=100;w=60`, `"plan";r=59;t=120`, ""},
				{"GET", "/v1/items", "b", "40", 200, `"plan";q=10000;w=60`, `"plan";r=9960;t=120`, ""},
				// Bad input: 400, and nothing consumed.
				{"GET", "/v1/items", "a", "0", 400, "", "", ""},
				{"GET", "/v1/items", "a", "-5", 400, "", "", ""},
				{"GET", "/v1/items", "a", "9223372036854775807", 400, "", "", ""},
				{"GET", "/v1/items", "a", "many", 400, "", "", ""},
				{"GET", "/v1/items", "c", "", 400, "", "", ""},
				// A cost above the plan's limit never passes.
				{"GET", "/v1/items", "a", "101", 429, `"plan";q=100;w=60`, `"plan";r=59`, ""},
				{"GET", "/v1/items", "b", "101", 200, `"plan";q=10000;w=60`, `"plan";r=9859;t=120`, ""},
				// A cost the limit allows but the tenant's rest does not.
				{"GET", "/v1/items", "a", "60", 429, `"plan";q=100;w=60`, `"plan";r=59;t=62`, "62"},
				{"GET", "/v1/items", "a", "59", 200, `"plan";q=100;w=60`, `"plan";r=0;t=120`, ""},
				// The chat route adds its rule.
				{"POST", "/v1/chat/7", "b", "", 200, `"plan";q=10000;w=60, "chat";q=5;w=60`, `"chat";r=4;t=120`, ""},
				// No tenant: neither rule applies.
				{"GET", "/v1/items", "", "", 200, "", "", ""},
			} {
				resp := do(h, c.method, c.path, "X-Tenant", c.tenant, "X-Tokens", c.tokens)
				got := []string{strconv.Itoa(resp.StatusCode), resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")}
				want := []string{strconv.Itoa(c.status), c.policy, c.rateLimit}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("step %d: %s %s tenant %q tokens %q: got %q, want %q", i, c.method, c.path, c.tenant, c.tokens, got, want)
				}
				if ra := resp.Header.Get("Retry-After"); ra != c.retryAfter {
					t.Errorf("step %d: Retry-After %q, want %q", i, ra, c.retryAfter)
				}
			}
		})
	}
}

// TestRoutePatterns checks which rules apply to which requests: a rule with
// a pattern applies to the requests a ServeMux holding the patterns routes
// to it, the most specific pattern winning, and rules without one to all.
func TestRoutePatterns(t *testing.T) {
	t.Parallel()
	st := testStores(t, fixedNow())[0]
	rule := func(name, pattern string) httplimit.Rule {
		return httplimit.Rule{Name: name, Pattern: pattern, Limit: redlimit.PerHour(100), Key: httplimit.Static("k")}
	}
	h := mustNew(t, st.lim, httplimit.Options{},
		rule("all", ""),
		rule("chat", "POST /v1/chat/{id}"),
		rule("chat2", "POST /v1/chat/{id}"), // two rules on one route
		rule("items", "/v1/items/"),
		rule("item", "GET /v1/items/{id}"),
		rule("host", "api.example.com/v1/items/"),
	).Handle(okHandler())
	for _, c := range []struct {
		method, target string
		rules          string // the RateLimit-Policy names, in order
	}{
		{"POST", "http://x/v1/chat/7", `all chat chat2`},
		{"GET", "http://x/v1/chat/7", `all`}, // the mux would answer 405
		{"POST", "http://x/v1/chat/7/more", `all`},
		{"GET", "http://x/v1/items/7", `all item`}, // more specific than /v1/items/
		{"HEAD", "http://x/v1/items/7", `all item`},
		{"POST", "http://x/v1/items/7", `all items`},
		{"GET", "http://x/v1/items/7/parts", `all items`},
		{"GET", "http://api.example.com/v1/items/7/parts", `all host`}, // a host pattern first
		{"GET", "http://x/v1/items", `all`},                            // the mux would redirect
		{"GET", "http://x/other", `all`},
	} {
		resp := do(h, c.method, c.target)
		policies, err := ratelimitfield.ParseRateLimitPolicy(resp.Header.Values("RateLimit-Policy"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range policies {
			names = append(names, p.Name)
		}
		if got := fmt.Sprint(names); got != "["+c.rules+"]" {
			t.Errorf("%s %s: rules %s, want [%s]", c.method, c.target, got, c.rules)
		}
	}
}

// TestNewPerRequestRules checks what New refuses of the new fields.
func TestNewPerRequestRules(t *testing.T) {
	t.Parallel()
	st := testStores(t, nil)[0]
	key := httplimit.Static("k")
	for _, c := range []struct {
		name  string
		rules []httplimit.Rule
	}{
		{"Limit and LimitFunc", []httplimit.Rule{{Name: "a", Key: key, Limit: redlimit.PerSecond(1), LimitFunc: planLimit}}},
		{"Cost and CostFunc", []httplimit.Rule{{Name: "a", Key: key, Limit: redlimit.PerSecond(1), Cost: 1, CostFunc: tokenCost}}},
		{"cost above MaxCost", []httplimit.Rule{{Name: "a", Key: key, LimitFunc: planLimit, Cost: redlimit.MaxCost + 1}}},
		{"malformed pattern", []httplimit.Rule{{Name: "a", Key: key, Limit: redlimit.PerSecond(1), Pattern: "GET /{x"}}},
		{"conflicting patterns", []httplimit.Rule{
			{Name: "a", Key: key, Limit: redlimit.PerSecond(1), Pattern: "/a/{x}"},
			{Name: "b", Key: key, Limit: redlimit.PerSecond(1), Pattern: "/{y}/b"},
		}},
	} {
		if _, err := httplimit.New(st.lim, httplimit.Options{}, c.rules...); !errors.Is(err, httplimit.ErrInvalidRule) {
			t.Errorf("%s: err %v, want ErrInvalidRule", c.name, err)
		}
	}
	if _, err := httplimit.New(st.lim, httplimit.Options{}, httplimit.Rule{Name: "a", Key: key}); !errors.Is(err, redlimit.ErrUnknownAlgorithm) {
		t.Errorf("no Limit nor LimitFunc: err %v, want ErrUnknownAlgorithm", err)
	}
	// A LimitFunc's rule takes any cost up to MaxCost; the request decides.
	if _, err := httplimit.New(st.lim, httplimit.Options{}, httplimit.Rule{Name: "a", Key: key, LimitFunc: planLimit, Cost: 500}); err != nil {
		t.Errorf("LimitFunc with Cost 500: %v", err)
	}
}

// TestTiersExactConcurrent sends, from many goroutines through four
// middlewares on one store (four clients for Redis), more than each tenant's
// plan allows, with costs and bad input mixed in. The free tenant is
// admitted exactly 100 requests, the pro tenant exactly the requests whose
// costs fit 10,000, and every bad request gets 400 and consumes nothing.
func TestTiersExactConcurrent(t *testing.T) {
	t.Parallel()
	s := rulesettest.NewStores(t, "httplimit", fixedNow())
	for _, st := range []testStore{{name: "memory", lim: &peeker{s.Memory}}, {name: "redis", lim: &peeker{s.Redis}}} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			lims := []redlimit.Limiter{st.lim, st.lim, st.lim, st.lim}
			if st.name == "redis" {
				lims = lims[:0]
				for _, rs := range s.RedisClients(t, 4) {
					lims = append(lims, rs)
				}
			}
			hs := make([]http.Handler, len(lims))
			for i, lim := range lims {
				hs[i] = mustNew(t, lim, quiet(), tierRules()...).Handle(okHandler())
			}
			const (
				freeSent = 160
				proSent  = 320
				proCost  = 37 // 10,000/37 = 270 admitted, 9,990 used
				badSent  = 40
				workers  = 16
			)
			type job struct{ tenant, tokens string }
			var jobs []job
			for range freeSent {
				jobs = append(jobs, job{"a", ""})
			}
			for range proSent {
				jobs = append(jobs, job{"b", strconv.Itoa(proCost)})
			}
			for i := range badSent {
				jobs = append(jobs, []job{{"a", "0"}, {"b", "-1"}, {"c", "1"}, {"b", "99999999999999"}}[i%4])
			}
			rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

			var mu sync.Mutex
			counts := map[string]map[int]int{} // tenant+tokens → status → count
			var wg sync.WaitGroup
			next := make(chan job)
			for w := range workers {
				wg.Go(func() {
					for j := range next {
						resp := do(hs[w%len(hs)], "GET", "/v1/items", "X-Tenant", j.tenant, "X-Tokens", j.tokens)
						mu.Lock()
						k := j.tenant + "/" + j.tokens
						if counts[k] == nil {
							counts[k] = map[int]int{}
						}
						counts[k][resp.StatusCode]++
						mu.Unlock()
					}
				})
			}
			for _, j := range jobs {
				next <- j
			}
			close(next)
			wg.Wait()

			if got := counts["a/"]; got[200] != 100 || got[429] != freeSent-100 {
				t.Errorf("free tenant: %v, want 100 admitted and %d denied", got, freeSent-100)
			}
			proOK := int(10_000 / proCost)
			if got := counts["b/"+strconv.Itoa(proCost)]; got[200] != proOK || got[429] != proSent-proOK {
				t.Errorf("pro tenant: %v, want %d admitted and %d denied", got, proOK, proSent-proOK)
			}
			bad := 0
			for _, k := range []string{"a/0", "b/-1", "c/1", "b/99999999999999"} {
				bad += counts[k][400]
				if len(counts[k]) != 1 {
					t.Errorf("bad request %s: %v, want 400 only", k, counts[k])
				}
			}
			if bad != badSent {
				t.Errorf("%d bad requests got 400, want %d", bad, badSent)
			}
			// The costs were counted exactly: the pro tenant has 10 left,
			// 9 after the unit that peek asks about.
			if res := st.lim.peek(t, "plan:b", plans["pro"]); res.Remaining != 10_000-int64(proOK*proCost)-1 {
				t.Errorf("pro tenant: %d remaining after one more, want %d", res.Remaining, 10_000-proOK*proCost-1)
			}
		})
	}
}

// TestTiersSameOnBothStores sends one random sequence of requests (tenants,
// costs, bad input, routes) through a middleware on the memory store and
// one on Redis, on the same clock, and checks the answers are the same.
func TestTiersSameOnBothStores(t *testing.T) {
	t.Parallel()
	var at time.Time
	var mu sync.Mutex
	at = time.Now().Truncate(time.Second)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	sts := testStores(t, now)
	hs := make([]http.Handler, len(sts))
	for i, st := range sts {
		hs[i] = mustNew(t, st.lim, quiet(), tierRules()...).Handle(okHandler())
	}
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	tenants := []string{"a", "b", "c", ""}
	tokens := []string{"", "1", "7", "60", "100", "101", "5000", "0", "-3", "x"}
	paths := []string{"GET /v1/items", "POST /v1/chat/1", "GET /v1/chat/1"}
	for i := range 400 {
		if rng.IntN(10) == 0 {
			mu.Lock()
			at = at.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
			mu.Unlock()
		}
		tenant, tok := tenants[rng.IntN(len(tenants))], tokens[rng.IntN(len(tokens))]
		mp := paths[rng.IntN(len(paths))]
		var method, path string
		fmt.Sscan(mp, &method, &path)
		var answers []string
		for _, h := range hs {
			resp := do(h, method, path, "X-Tenant", tenant, "X-Tokens", tok)
			answers = append(answers, fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("RateLimit"), " ", resp.Header.Get("Retry-After")))
		}
		if answers[0] != answers[1] {
			t.Fatalf("seed %d step %d: %s tenant %q tokens %q: memory %q, redis %q", seed, i, mp, tenant, tok, answers[0], answers[1])
		}
	}
}
