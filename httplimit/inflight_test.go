package httplimit_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

// TestInFlight: with an in-flight rule of N slots, requests of 4
// middlewares (4 servers) × 16 clients never run more than N handlers at
// once (a counter in the handler); the others get 429; a handler that
// outlives the TTL keeps its slot; every slot is free once all returned.
func TestInFlight(t *testing.T) {
	stores := rulesettest.NewStores(t, "httplimit", nil)
	for _, tc := range []struct {
		name string
		lim  redlimit.Limiter
	}{{"memory", stores.Memory}, {"redis", stores.Redis}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 3
			// Renewals every TTL/3 hold with ticks up to 1.3s late (600ms
			// was seen under -race on a busy machine).
			c := redlimit.InFlight(n, 2*time.Second)
			var in, most, served atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				x := in.Add(1)
				for m := most.Load(); x > m && !most.CompareAndSwap(m, x); m = most.Load() {
				}
				time.Sleep(c.TTL + 100*time.Millisecond) // past the TTL: renewed
				in.Add(-1)
				served.Add(1)
			})
			var urls []string
			for range 4 {
				m, err := httplimit.New(tc.lim, httplimit.Options{},
					httplimit.Rule{Name: "rate", Limit: redlimit.PerSecond(1000), Key: httplimit.Static("all")},
					httplimit.Rule{Name: "jobs", InFlight: c, Key: httplimit.Header("X-Tenant")},
				)
				if err != nil {
					t.Fatal(err)
				}
				urls = append(urls, serve(t, m.Handle(h)).URL)
			}
			var denied atomic.Int64
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 2 {
						resp, _ := get(t, urls[i%4], "X-Tenant", "t1")
						if resp.StatusCode == http.StatusTooManyRequests {
							denied.Add(1)
						} else if resp.StatusCode != http.StatusOK {
							t.Errorf("status %d", resp.StatusCode)
						}
					}
				}()
			}
			wg.Wait()
			if most.Load() > n {
				t.Fatalf("%d handlers at once, limit %d", most.Load(), n)
			}
			if served.Load() == 0 || denied.Load() == 0 {
				t.Fatalf("served %d, denied %d", served.Load(), denied.Load())
			}
			// Every slot was released.
			for range n {
				resp, _ := get(t, urls[0], "X-Tenant", "t1")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("after all returned: status %d", resp.StatusCode)
				}
			}
			// No key: the rule is skipped.
			if resp, _ := get(t, urls[0]); resp.StatusCode != http.StatusOK {
				t.Fatalf("no tenant: status %d", resp.StatusCode)
			}
		})
	}
}

// TestInFlightBadRule: an in-flight rule with a rate limit's fields, a
// bad concurrency limit, or a limiter without leases is refused by New.
func TestInFlightBadRule(t *testing.T) {
	stores := rulesettest.NewStores(t, "httplimit", nil)
	key := httplimit.Static("x")
	c := redlimit.InFlight(2, time.Second)
	cases := []struct {
		name string
		lim  redlimit.Limiter
		rule httplimit.Rule
		want error
	}{
		{"with a limit", stores.Memory, httplimit.Rule{Name: "a", InFlight: c, Limit: redlimit.PerSecond(1), Key: key}, httplimit.ErrInvalidRule},
		{"shadow", stores.Memory, httplimit.Rule{Name: "a", InFlight: c, Shadow: true, Key: key}, httplimit.ErrInvalidRule},
		{"no slots", stores.Memory, httplimit.Rule{Name: "a", InFlight: redlimit.InFlight(0, time.Second), Key: key}, redlimit.ErrInvalidConcurrency},
		{"bad TTL", stores.Memory, httplimit.Rule{Name: "a", InFlight: redlimit.InFlight(1, time.Nanosecond), Key: key}, redlimit.ErrInvalidConcurrency},
		{"no leases", &peeker{stores.Memory}, httplimit.Rule{Name: "a", InFlight: c, Key: key}, httplimit.ErrInvalidRule},
	}
	for _, tc := range cases {
		if _, err := httplimit.New(tc.lim, httplimit.Options{}, tc.rule); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
