package shadow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/shadow"
)

// A tighter limit tried in shadow mode: it counts and says when it would
// deny, but only the enforced limit denies.
func ExampleDecide() {
	t0 := time.Unix(1_700_000_000, 0)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	reqs := []redlimit.Request{
		{Key: "user:42", Limit: redlimit.PerMinute(3), Cost: 1},
		{Key: "user:42:trial", Limit: redlimit.PerMinute(1), Cost: 1},
	}
	roles := []shadow.Role{shadow.Enforced, shadow.Shadow}
	for i := 1; i <= 4; i++ {
		d, err := shadow.Decide(context.Background(), store, reqs, roles)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("request %d: allowed %v, the trial would deny: %v\n", i, d.Allowed, d.Results[1].Denied())
	}
	// Output:
	// request 1: allowed true, the trial would deny: false
	// request 2: allowed true, the trial would deny: true
	// request 3: allowed true, the trial would deny: true
	// request 4: allowed false, the trial would deny: true
}
