package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

// At most two reports of a tenant run at once, across every server
// sharing the store (a redisstore.Store; here a memory store).
func ExampleRule_inFlight() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limits, err := httplimit.New(store, httplimit.Options{},
		httplimit.Rule{Name: "reports", InFlight: redlimit.InFlight(2, 30*time.Second), Key: httplimit.Header("X-Tenant")},
	)
	if err != nil {
		panic(err)
	}
	running := make(chan struct{})
	finish := make(chan struct{})
	report := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running <- struct{}{}
		<-finish
	})
	srv := httptest.NewServer(limits.Handle(report))
	defer srv.Close()

	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- get() }()
		<-running
	}
	fmt.Println("third while two run:", get())
	close(finish)
	fmt.Println("the two:", <-done, <-done)
	go func() { <-running }()
	fmt.Println("after they returned:", get())
	// Output:
	// third while two run: 429
	// the two: 200 200
	// after they returned: 200
}
