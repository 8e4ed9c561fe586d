package rls

import (
	"context"
	"fmt"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestFullMemoryStoreKeepsBudget (issue 25, item 3): Envoy's
// check-then-debit flow on a memory store full of states in use. Each
// check (hits_addend 0) of a new user passed, and each debit of 100 that
// followed was refused by the store and never counted: ten checks and ten
// debits against a budget of 100 an hour, none counted. A check the store
// has no room for is OVER_LIMIT, so no work is done that would not count.
func TestFullMemoryStoreKeepsBudget(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	store, err := memory.New(memory.WithClock(clock.Now), memory.WithMaxKeys(16), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for i := range 16 {
		if r, err := store.AllowN(context.Background(), fmt.Sprint("used", i), redlimit.PerHour(1).FixedWindow(), 1); err != nil || !r.Allowed {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	f := newFixture(t, Options{Limiter: store})
	f.svc.SetConfig(parsed(t, `domain: tokens
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
`))
	var worked int
	for range 10 {
		if sig(f.do(request("tokens", withHits(desc("user", "u"), 0)))) != "O:O" {
			continue
		}
		worked++
		f.do(request("tokens", withHits(desc("user", "u"), 100)))
	}
	if worked > 1 {
		t.Errorf("%d checks of a budget of 100 passed, each followed by a debit of 100 (store %+v)", worked, store.Stats())
	}
}
