package redlimittest

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit"
)

// runGrantOwnsRequests: a Grant keeps the requests Admit decided, not the
// caller's slice. A caller may reuse its slice after Admit: a pool, a
// loop's buffer. Its Refund still gives back to the keys admitted, not to
// whatever the slice holds by then. Stores that are not a
// [redlimit.Refunder] skip it.
func runGrantOwnsRequests(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	store, ok := newStore(t, clock.Now).(redlimit.Refunder)
	if !ok {
		t.Skip("not a redlimit.Refunder")
	}
	ctx := context.Background()
	u := uniq()
	l := redlimit.PerMinute(10).FixedWindow()
	reqs := []redlimit.Request{{Key: "admitted" + u, Limit: l, Cost: 3}}
	g, err := store.Admit(ctx, reqs)
	if err != nil || !g.Allowed {
		t.Fatalf("admit: %+v, %v", g, err)
	}
	reqs[0] = redlimit.Request{Key: "other" + u, Limit: l, Cost: 1}
	if g.Requests[0].Key != "admitted"+u || g.Requests[0].Cost != 3 {
		t.Errorf("the grant's request follows the caller's slice: %+v", g.Requests[0])
	}
	if err := store.Refund(ctx, g, []int64{3}); err != nil {
		t.Fatalf("refund: %v", err)
	}
	if r, err := store.Peek(ctx, "admitted"+u, l, 1); err != nil || r.Remaining != l.Count-1 {
		t.Errorf("the key admitted after its refund: %+v, %v; want all 10 back (%d remaining after a peek of 1)", r, err, l.Count-1)
	}
}
