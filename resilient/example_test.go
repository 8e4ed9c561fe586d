package resilient_test

import (
	"context"
	"fmt"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/resilient"
)

// A Limiter in front of a store: here an in-process one, so that the
// example runs anywhere; in production, a redisstore.Store and its node
// registry as Options.Nodes.
func ExampleNew() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	l, err := resilient.New(store, resilient.Options{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	lim := redlimit.PerMinute(2)
	// The third is denied by the store, which the Limiter remembers: the
	// fourth is denied without asking it.
	for range 4 {
		res, err := l.Allow(context.Background(), "ip:192.0.2.1", lim)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed, res.Remaining, res.Source)
	}
	// Output:
	// true 1 store
	// true 0 store
	// false 0 store
	// false 0 deny_cache
}
