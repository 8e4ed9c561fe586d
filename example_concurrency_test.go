package redlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// At most two jobs of a tenant run at once, across every server sharing
// the store (a redisstore.Store; here a memory store). A job holds its
// slot while it runs; a holder that dies frees it at the TTL.
func ExampleHold() {
	store, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	jobs := redlimit.InFlight(2, 30*time.Second)

	var releases []func()
	for i := 1; i <= 3; i++ {
		lease, release, err := redlimit.Hold(ctx, store, "tenant-42", jobs)
		if err != nil {
			panic(err)
		}
		fmt.Printf("job %d: held %v, in flight %d\n", i, lease.Held, lease.InFlight)
		releases = append(releases, release)
	}
	defer func() {
		for _, release := range releases {
			release() // once each: later calls do nothing
		}
	}()
	releases[0]() // job 1 ends
	lease, release, _ := redlimit.Hold(ctx, store, "tenant-42", jobs)
	defer release()
	fmt.Printf("job 4: held %v, in flight %d\n", lease.Held, lease.InFlight)
	// Output:
	// job 1: held true, in flight 1
	// job 2: held true, in flight 2
	// job 3: held false, in flight 2
	// job 4: held true, in flight 2
}
