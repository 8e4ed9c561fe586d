package redlimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/resilient"
)

// A limit on an HTTP server, ready for production: the README shows this
// body. It needs Redis, so it is compiled, not run.
func Example_production() {
	ctx := context.Background()
	lim, err := resilient.Open(ctx, "redis://127.0.0.1:6379", resilient.Options{})
	if err != nil {
		log.Fatal(err) // names the problem: refused, WRONGPASS, TLS...
	}
	defer lim.Close()

	// Behind a proxy, list its networks in TrustedProxies.
	ip, err := httplimit.IPKey(clientip.Resolver{})
	if err != nil {
		log.Fatal(err)
	}
	limits, err := httplimit.New(lim, httplimit.Options{},
		httplimit.Rule{Name: "ip", Limit: redlimit.PerSecond(10), Key: ip},
	)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", limits.Handle(mux)))
}
