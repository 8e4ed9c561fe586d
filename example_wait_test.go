package redlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// Workers sharing a vendor API that takes 4 calls a second wait their
// turns instead of being refused: each Wait takes the next instant of
// the token bucket. On a redisstore.Store, every process queues in one
// line.
func ExampleWait() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	limit := redlimit.Per(4, time.Second).TokenBucket(1) // one call each 250ms

	start := time.Now()
	for i := range 3 {
		res, err := redlimit.Wait(ctx, store, "vendor-api", limit, 1, time.Second)
		if err != nil {
			panic(err)
		}
		waited := time.Since(start) >= time.Duration(i)*250*time.Millisecond
		fmt.Printf("call %d: allowed %v, at its turn %v\n", i, res.Allowed, waited)
	}

	// A call that would wait longer than it may is refused at once. Its
	// turn is 250ms away: a busy machine's pause does not bring it.
	res, err := redlimit.Wait(ctx, store, "vendor-api", limit, 1, 10*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Printf("impatient call: allowed %v, retry after %v\n", res.Allowed, res.RetryAfter > 10*time.Millisecond)
	// Output:
	// call 0: allowed true, at its turn true
	// call 1: allowed true, at its turn true
	// call 2: allowed true, at its turn true
	// impatient call: allowed false, retry after true
}
