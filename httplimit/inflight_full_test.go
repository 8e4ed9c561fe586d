package httplimit_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

// TestInFlightFullMemoryStore: a memory store whose leases fill its bound
// (other tenants' held requests, or a flood of new keys) must not serve a
// new tenant's requests unlimited. Two requests of tenant c on a rule of
// one slot never run at once; a full store denies them, as it denies the
// rate limits of new keys.
func TestInFlightFullMemoryStore(t *testing.T) {
	mem, err := memory.New(memory.WithMaxKeys(2))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	m := mustNew(t, mem, httplimit.Options{},
		httplimit.Rule{Name: "jobs", InFlight: redlimit.InFlight(1, time.Minute), Key: httplimit.Header("X-Tenant")})
	var mu sync.Mutex
	in, most := map[string]int{}, map[string]int{}
	entered, unblock := make(chan string, 8), make(chan struct{})
	url := serve(t, m.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Tenant")
		mu.Lock()
		in[tenant]++
		most[tenant] = max(most[tenant], in[tenant])
		mu.Unlock()
		entered <- tenant
		<-unblock
		mu.Lock()
		in[tenant]--
		mu.Unlock()
	}))).URL
	status := make(chan int, 8)
	send := func(tenant string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Tenant", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}
	wait := func(what string) string {
		select {
		case x := <-entered:
			return x
		case <-time.After(10 * time.Second):
			t.Fatalf("no request reached the handler: %s", what)
		}
		return ""
	}
	go send("a")
	go send("b")
	wait("a and b")
	wait("a and b")
	// The store holds its bound of leases now.
	go send("c")
	go send("c")
	answered := 0
	for done := false; !done; {
		select {
		case <-entered:
		case code := <-status:
			if code != http.StatusTooManyRequests {
				t.Errorf("tenant c, store full: status %d, want 429", code)
			}
			answered++
		case <-time.After(2 * time.Second):
			done = true
		}
		done = done || answered == 2
	}
	close(unblock)
	mu.Lock()
	defer mu.Unlock()
	if most["c"] > 1 {
		t.Fatalf("tenant c ran %d requests at once on one slot", most["c"])
	}
}
