package reserve_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/reserve"
)

// fakeModel stands in for a language model: it answers with as many tokens
// as the prompt asks for, and reports how many it used.
func fakeModel(_ context.Context, prompt string, maxTokens int64) (answer string, used int64) {
	n, _ := strconv.ParseInt(prompt, 10, 64)
	used = min(n, maxTokens)
	return fmt.Sprintf("%d tokens", used), used
}

type reservationKey struct{}

// An LLM gateway's token budget: the middleware reserves the most a call
// may cost (its max_tokens) before the handler runs, and releases it after
// the handler, which does nothing if the handler settled it; the handler
// settles with the tokens the model reports. A call is admitted only while
// its max_tokens fit: with 150 tokens left, even a short prompt waits.
func Example() {
	store, _ := memory.New(memory.WithClock(func() time.Time { return time.Unix(1_800_000_000, 0) }))
	defer store.Close()
	ledger, _ := reserve.New(store, reserve.Options{Timeout: 5 * time.Minute})
	defer ledger.Close()

	budget := redlimit.PerMinute(1000).SlidingLog() // tokens per user per minute
	const maxTokens = 400

	reserveTokens := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, err := ledger.Reserve(r.Context(), "user:"+r.Header.Get("User"), budget, maxTokens)
			if err != nil {
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
				return
			}
			if !res.OK() {
				if ra, ok := ratelimitfield.RetryAfterValue(res.RetryAfter()); ok {
					w.Header().Set("Retry-After", ra) // whole seconds, rounded up
				}
				http.Error(w, "token budget spent", http.StatusTooManyRequests)
				return
			}
			defer res.Release(r.Context()) // the handler failed: nothing was used
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reservationKey{}, res)))
		})
	}
	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer, used := fakeModel(r.Context(), r.FormValue("prompt"), maxTokens)
		res := r.Context().Value(reservationKey{}).(*reserve.Reservation)
		if err := res.Settle(r.Context(), used); err != nil {
			fmt.Println("settle:", err)
		}
		fmt.Fprint(w, answer)
	})
	srv := reserveTokens(complete)

	for _, prompt := range []string{"150", "400", "300", "90", "10"} {
		req := httptest.NewRequest("POST", "/v1/complete?prompt="+prompt, nil)
		req.Header.Set("User", "ada")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		left, _ := store.Peek(context.Background(), "user:ada", budget, 1)
		fmt.Printf("%d %q, %d tokens left\n", w.Code, w.Body.String(), left.Remaining+1)
	}
	// Output:
	// 200 "150 tokens", 850 tokens left
	// 200 "400 tokens", 450 tokens left
	// 200 "300 tokens", 150 tokens left
	// 429 "token budget spent\n", 150 tokens left
	// 429 "token budget spent\n", 150 tokens left
}
