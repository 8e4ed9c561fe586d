package resilient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestLeasePolicies: with Redis down, each failure policy answers a lease
// as it answers a limit: local holds this node's share of the slots (4
// slots, 2 nodes: 2), fail_open holds, fail_closed does not.
func TestLeasePolicies(t *testing.T) {
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	store, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	l, err := resilient.New(store, resilient.Options{Nodes: resilient.FixedNodes(2), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	c := redlimit.InFlight(4, time.Minute)
	if got, err := l.Acquire(ctx, "up", c, "a"); err != nil || !got.Held || got.Source != redlimit.FromStore {
		t.Fatalf("Redis up: %+v, %v", got, err)
	}
	if _, err := l.Acquire(ctx, "", c, "a"); !errors.Is(err, redlimit.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		policy redlimit.FailurePolicy
		held   []bool // successive acquires of new leases
		source redlimit.Source
	}{
		{redlimit.FailLocal, []bool{true, true, false}, redlimit.FromLocal},
		{redlimit.FailOpen, []bool{true, true, true}, redlimit.FromFailOpen},
		{redlimit.FailClosed, []bool{false}, redlimit.FromFailClosed},
	}
	for _, tc := range cases {
		t.Run(tc.policy.String(), func(t *testing.T) {
			c := c.OnFailure(tc.policy)
			key := "down-" + tc.policy.String()
			for i, want := range tc.held {
				got, err := l.Acquire(ctx, key, c, redlimit.NewLeaseID())
				if err != nil || got.Held != want || got.Source != tc.source {
					t.Fatalf("acquire %d: %+v, %v; want held %v from %v", i, got, err, want, tc.source)
				}
			}
			if tc.policy != redlimit.FailLocal {
				return
			}
			// A release frees the local slot; a renewal takes one.
			if err := l.Release(ctx, key, c, "x"); err != nil {
				t.Fatal(err)
			}
			got, err := l.Renew(ctx, "renewed", c, "r")
			if err != nil || !got.Held {
				t.Fatalf("renew: %+v, %v", got, err)
			}
			if err := l.Release(ctx, "renewed", c, "r"); err != nil {
				t.Fatal(err)
			}
			if got, err := l.Acquire(ctx, "renewed", c, "s"); err != nil || !got.Held || got.InFlight != 1 {
				t.Fatalf("after release: %+v, %v", got, err)
			}
		})
	}
}
