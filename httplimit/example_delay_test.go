package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

// Delay: requests beyond the rate wait their turn instead of getting 429,
// as NGINX's delay=. Four requests at once on a limit of 10 a second are
// spaced 100ms apart. A request that would wait past Delay gets 429.
func ExampleRule_delay() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limits, err := httplimit.New(store, httplimit.Options{},
		httplimit.Rule{Name: "api", Limit: redlimit.Per(10, time.Second).TokenBucket(1),
			Key: httplimit.Header("X-Tenant"), Delay: 500 * time.Millisecond},
	)
	if err != nil {
		panic(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := limits.Handle(ok)
	get := func() int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant", "acme")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	start := time.Now()
	codes := make([]int, 4)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = get() })
	}
	wg.Wait()
	fmt.Println(codes, "spaced at the rate:", time.Since(start) >= 300*time.Millisecond)

	var refused atomic.Int64
	for range 20 { // 2s of turns: those past 500ms are refused
		wg.Go(func() {
			if get() == http.StatusTooManyRequests {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println("some of 20 more got 429:", refused.Load() > 0)
	// Output:
	// [200 200 200 200] spaced at the rate: true
	// some of 20 more got 429: true
}
