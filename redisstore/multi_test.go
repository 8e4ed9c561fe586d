package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// keyOf returns the one key under p whose name holds part.
func keyOf(t *testing.T, d deployment, p, part string) string {
	t.Helper()
	var found []string
	for _, k := range d.keysWithPrefix(t, p) {
		if strings.Contains(k, part) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("keys under %q holding %q: %q, want one", p, part, found)
	}
	return found[0]
}

// logUnits returns the units a sliding log's sorted set holds after its
// first member: each member names the units admitted through it, the
// first is the base ("b", 0) or an expired entry.
func logUnits(t *testing.T, d deployment, key string) int64 {
	t.Helper()
	return atoi(t, d.do(t, key, "EVAL", `local m = redis.call('ZRANGE', KEYS[1], 0, -1)
return tonumber(m[#m]) - (tonumber(m[1]) or 0)`, "1", key))
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestAllowAllConsumesNothingOnDenial checks in Redis itself that the limits
// of a denied several-limits request are untouched, one caller and many,
// decided by AllowAll and by Admit (whose groups on Cluster give the token
// bucket a refund record, and are refunded after a denial as AllowAll's).
func TestAllowAllConsumesNothingOnDenial(t *testing.T) {
	userLog := redlimit.Per(50, time.Hour).SlidingLog()
	userFixed := redlimit.Per(1000, redlimit.MaxPeriod).FixedWindow()
	route := redlimit.Per(1, time.Hour).TokenBucket(100000)
	ei := route.EmissionInterval()
	for _, d := range deployments {
		for _, admit := range []bool{false, true} {
			name := d.name
			if admit {
				name += "/admit"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := prefix(t)
				stores := make([]*redisstore.Store, 4)
				for i := range stores {
					stores[i] = d.store(t, redisstore.WithPrefix(p))
				}
				reqs := []redlimit.Request{
					{Key: "user:7", Limit: userLog, Cost: 1},
					{Key: "user:7", Limit: userFixed, Cost: 1},
					{Key: "route:/search", Limit: route, Cost: 1},
				}
				var admitted, denied atomic.Int64
				var wg sync.WaitGroup
				for _, s := range stores {
					for range 32 {
						wg.Go(func() {
							for range 4 {
								var dec redlimit.Decision
								var err error
								if admit {
									var g *redlimit.Grant
									if g, err = s.Admit(context.Background(), reqs); err == nil {
										dec = g.Decision
									}
								} else {
									dec, err = s.AllowAll(context.Background(), reqs)
								}
								if err != nil {
									t.Error(err)
									return
								}
								if dec.Allowed {
									admitted.Add(1)
								} else {
									denied.Add(1)
								}
							}
						})
					}
				}
				wg.Wait()
				if admitted.Load() != 50 || denied.Load() != 4*32*4-50 {
					t.Fatalf("admitted %d, denied %d; want 50 and %d", admitted.Load(), denied.Load(), 4*32*4-50)
				}
				// Redis holds exactly 50 of each: the denials consumed nothing.
				logKey := keyOf(t, d, p, "}:sl:")
				if n := logUnits(t, d, logKey); n != 50 {
					t.Errorf("sliding log holds %d units, want 50", n)
				}
				fixedKey := keyOf(t, d, p, "}:fw:")
				if n := atoi(t, d.do(t, fixedKey, "HVALS", fixedKey)); n != 50 {
					t.Errorf("fixed window counts %d, want 50", n)
				}
				// AllowAll leaves the TAT alone in the key, Admit a record too.
				v := bucketValue(t, d, p, "route:/search")
				if admit != (len(v) == 4) {
					t.Errorf("token bucket holds %v", v)
				}
				tat := v[0]
				now := time.Now().UnixMicro()
				// 50 tokens taken put the TAT 50 intervals ahead of the first
				// request: with one token an hour, no refill interferes.
				if used := (tat - now + ei - 1) / ei; used != 50 {
					t.Errorf("token bucket TAT is %d intervals ahead, want 50", used)
				}
			})
		}
	}
}
