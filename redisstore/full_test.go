package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
)

// A Redis that is full (maxmemory) with the policy docs/SECURITY.md asks
// for, noeviction, refuses new keys with an OOM error, which the store
// returns (so the caller's failure policy answers, not an admission), and
// keeps the limits it holds: an exhausted key stays denied however many
// new keys are tried. With an evicting policy the same flood gives the
// exhausted key its allowance back: the reason for the advice.
func TestFullRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy    string
		keepsDeny bool
	}{
		{"noeviction", true},
		{"allkeys-lru", false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			srv, s := ownServerStore(t)
			ctx := context.Background()
			login := redlimit.PerHour(5).SlidingLog()
			for range 5 {
				if r, err := s.AllowN(ctx, "login:alice", login, 1); err != nil || !r.Allowed {
					t.Fatalf("before the flood: %+v, %v", r, err)
				}
			}
			for _, cfg := range [][]string{{"maxmemory", "3mb"}, {"maxmemory-policy", tc.policy}} {
				if _, err := srv.Do("CONFIG", "SET", cfg[0], cfg[1]); err != nil {
					t.Fatal(err)
				}
			}
			flood := redlimit.PerHour(5).SlidingLog()
			oom := 0
			evicted := func() bool { // KEYS does not touch the key, as Peek would for LRU
				keys, err := srv.Do("KEYS", "*login:alice*")
				return err == nil && strings.TrimSpace(keys) == ""
			}
			for i := 0; i < 40_000 && oom == 0; i++ {
				if !tc.keepsDeny && i%500 == 0 && evicted() {
					break
				}
				key := fmt.Sprintf("flood:%06d:%s", i, strings.Repeat("x", 100))
				r, err := s.AllowN(ctx, key, flood, 1)
				switch {
				case err != nil && strings.Contains(err.Error(), "OOM"):
					oom++
				case err != nil:
					t.Fatalf("new key %d: %v, want an OOM error or an answer", i, err)
				case !r.Allowed:
					t.Fatalf("new key %d denied: %+v", i, r)
				}
			}
			r, err := s.AllowN(ctx, "login:alice", login, 1)
			switch {
			case tc.keepsDeny && oom == 0:
				t.Fatal("40,000 new keys in 3 MB and no OOM error")
			case tc.keepsDeny && (err != nil || r.Allowed):
				t.Fatalf("the exhausted key after the flood: %+v, %v; want denied", r, err)
			case !tc.keepsDeny && (err != nil || !r.Allowed):
				t.Fatalf("the exhausted key after an evicting flood: %+v, %v; want it evicted and allowed (the policy's danger)", r, err)
			}
		})
	}
}
