package memory_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// A store with an injected clock decides over chosen instants, without
// sleeping: here a token bucket empties, then refills as the clock advances.
func ExampleWithClock() {
	clock := redlimittest.NewClock(time.Unix(1_700_000_000, 0))
	store, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	limit := redlimit.PerSecond(2).TokenBucket(4) // a token every 500ms, at most 4
	try := func(n int64) {
		res, err := store.AllowN(ctx, "sensor:7", limit, n)
		if err != nil {
			log.Fatal(err)
		}
		if res.Allowed {
			fmt.Printf("cost %d: allowed, %d left\n", n, res.Remaining)
		} else {
			fmt.Printf("cost %d: denied, retry after %s\n", n, res.RetryAfter)
		}
	}

	try(4) // the whole burst at once
	try(1)
	clock.Advance(time.Second) // two tokens come back
	try(2)
	clock.Advance(2 * time.Second) // the bucket is full again
	try(4)

	// Output:
	// cost 4: allowed, 0 left
	// cost 1: denied, retry after 500ms
	// cost 2: allowed, 0 left
	// cost 4: allowed, 0 left
}

// New takes options; Close stops the background sweeper.
func ExampleNew() {
	store, err := memory.New(
		memory.WithMaxKeys(100_000),              // evict beyond 100,000 (key, limit) states
		memory.WithSweepInterval(30*time.Second), // drop expired states twice a minute
	)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	res, err := store.Allow(context.Background(), "ip:192.0.2.1", redlimit.PerMinute(60))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Allowed, res.Remaining, store.Len())

	// Output:
	// true 59 1
}
