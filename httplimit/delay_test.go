package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

// TestDelayMode: with a Delay of 3 emission intervals, 5 requests at once
// on a bucket of burst 1: the first is served at once, the next 3 are
// delayed, each an interval after the last, and the fifth gets 429 at
// once, with Retry-After.
func TestDelayMode(t *testing.T) {
	s := rulesettest.NewStores(t, "httplimit", nil)
	for _, st := range []struct {
		name string
		lim  redlimit.Limiter
	}{{"memory", s.Memory}, {"redis", s.Redis}} {
		t.Run(st.name, func(t *testing.T) {
			l := redlimit.Per(2, time.Second).TokenBucket(1) // one each 500ms: more than a busy machine's start lag
			m, err := httplimit.New(st.lim, httplimit.Options{}, httplimit.Rule{
				Name: "delay-" + st.name, Limit: l, Key: httplimit.RemoteIP, Delay: 1500 * time.Millisecond,
			}, httplimit.Rule{Name: "other-" + st.name, Limit: redlimit.PerMinute(100), Key: httplimit.RemoteIP})
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			type answer struct {
				code  int
				took  time.Duration
				retry string
			}
			var mu sync.Mutex
			var as []answer
			var wg sync.WaitGroup
			start := time.Now()
			for range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
					mu.Lock()
					as = append(as, answer{rec.Code, time.Since(start), rec.Header().Get("Retry-After")})
					mu.Unlock()
				}()
			}
			wg.Wait()
			sort.Slice(as, func(i, j int) bool { return as[i].took < as[j].took })
			var ok, denied int
			for _, a := range as {
				switch a.code {
				case http.StatusOK:
					ok++
				case http.StatusTooManyRequests:
					denied++
					if a.retry == "" {
						t.Errorf("429 without Retry-After")
					}
				}
			}
			if ok != 4 || denied != 1 {
				t.Fatalf("answers %+v: want 4 served and 1 refused", as)
			}
			// The last served waited its 3 intervals (less a clock's slack).
			if last := as[len(as)-1]; last.code != http.StatusOK || last.took < 1490*time.Millisecond {
				t.Errorf("the last answer %+v: want a 200 after 1.5s", last)
			}
		})
	}
}

// TestDelayInvalid: a negative delay, or one on a shadow rule, is refused.
func TestDelayInvalid(t *testing.T) {
	s := rulesettest.NewStores(t, "httplimit", nil)
	for _, r := range []httplimit.Rule{
		{Name: "neg", Limit: redlimit.PerSecond(1), Key: httplimit.RemoteIP, Delay: -time.Second},
		{Name: "shadow", Limit: redlimit.PerSecond(1), Key: httplimit.RemoteIP, Delay: time.Second, Shadow: true},
	} {
		if _, err := httplimit.New(s.Memory, httplimit.Options{}, r); err == nil {
			t.Errorf("rule %q: no error", r.Name)
		}
	}
}
