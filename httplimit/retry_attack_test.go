package httplimit_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestWaitingRetryAfterPasses sends requests under random rules (every
// algorithm, costs, shadow rules) on a clock that moves at random; on each
// 429 it checks the fields (Retry-After a positive integer, the RateLimit
// field's t equal to it, r not negative), then waits exactly Retry-After
// and sends the same request again, which must pass: the client was told
// to wait that long.
func TestWaitingRetryAfterPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	algs := []func(redlimit.Limit) redlimit.Limit{
		func(l redlimit.Limit) redlimit.Limit { return l.FixedWindow() },
		func(l redlimit.Limit) redlimit.Limit { return l.SlidingWindow() },
		func(l redlimit.Limit) redlimit.Limit { return l.SlidingLog() },
		func(l redlimit.Limit) redlimit.Limit { return l.TokenBucket(l.Count) },
		func(l redlimit.Limit) redlimit.Limit { return l.TokenBucket(1 + l.Count/2) },
	}
	periods := []time.Duration{time.Second, 1500 * time.Millisecond, 10 * time.Second, time.Minute, 7 * time.Second}
	for run := range 60 {
		clock := redlimittest.NewClock(time.Now().Truncate(time.Hour).Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
		var s redlimit.Limiter
		if run%2 == 0 {
			ms, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			s = ms
		} else {
			s = rulesettest.NewStores(t, "httplimit", clock.Now).Redis
		}
		var rules []httplimit.Rule
		for i := range 1 + rng.IntN(3) {
			l := algs[rng.IntN(len(algs))](redlimit.Per(int64(1+rng.IntN(10)), periods[rng.IntN(len(periods))]))
			rules = append(rules, httplimit.Rule{
				Name: "r" + strconv.Itoa(i), Limit: l, Key: httplimit.Static("k"),
				Cost: 1 + rng.Int64N(l.Max()), Shadow: i > 0 && rng.IntN(4) == 0,
			})
		}
		m, err := httplimit.New(s, httplimit.Options{}, rules...)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handle(okHandler())
		do := func() *http.Response {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			return w.Result()
		}
		for step := range 80 {
			clock.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			resp := do()
			if resp.StatusCode == http.StatusOK {
				continue
			}
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("run %d step %d: status %d", run, step, resp.StatusCode)
			}
			ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
			if err != nil || ra < 1 {
				t.Fatalf("run %d step %d: Retry-After %q", run, step, resp.Header.Get("Retry-After"))
			}
			sl, err := ratelimitfield.ParseRateLimit(resp.Header.Values("RateLimit"))
			if err != nil || len(sl) != 1 {
				t.Fatalf("run %d step %d: RateLimit %q: %v", run, step, resp.Header.Values("RateLimit"), err)
			}
			if sl[0].Reset != time.Duration(ra)*time.Second || sl[0].Remaining < 0 {
				t.Errorf("run %d step %d: RateLimit %q with Retry-After %d", run, step, resp.Header.Values("RateLimit"), ra)
			}
			clock.Advance(time.Duration(ra) * time.Second)
			if again := do(); again.StatusCode != http.StatusOK {
				t.Fatalf("run %d step %d: rules %v: denied again after waiting Retry-After %d s: %d, Retry-After %q", run, step, rules, ra, again.StatusCode, again.Header.Get("Retry-After"))
			}
		}
	}
}
