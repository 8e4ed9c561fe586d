package backoff_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/backoff"
)

// A client whose requests wait and retry when the server says 429 with
// Retry-After. Here the server refuses the first attempt and asks for no
// wait at all.
func ExampleTransport() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	client := &http.Client{Transport: &backoff.Transport{
		Policy: backoff.Policy{MaxAttempts: 3, MaxWait: 10 * time.Second},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts.Load(), "attempts")
	// Output:
	// 200 after 2 attempts
}

func ExampleRetryAfter() {
	resp := &http.Response{Header: http.Header{}}
	resp.Header.Set("Date", "Sun, 01 Mar 2026 12:00:00 GMT")
	resp.Header.Set("Retry-After", "Sun, 01 Mar 2026 12:01:30 GMT")
	fmt.Println(backoff.RetryAfter(resp))
	resp.Header.Set("Retry-After", "5")
	fmt.Println(backoff.RetryAfter(resp))
	// Output:
	// 1m30s true
	// 5s true
}
