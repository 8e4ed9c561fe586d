package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// TestScriptTimeOutOfRange: the scripts read a time outside the Unix epoch
// to 2^52 µs (a server clock past 2112, or any caller's text) as the
// nearest bound, as the Store does with WithClock (internal/micros): no
// limit admits more than its count there. The Store never sends such a
// time, so the script is called with AllowAll's arguments directly.
func TestScriptTimeOutOfRange(t *testing.T) {
	d := deployments[0]
	s := d.store(t, redisstore.WithPrefix(prefix(t)))
	ctx := context.Background()
	client, script := decisionScript(t, d)
	limits := []redlimit.Limit{
		redlimit.PerHour(3).FixedWindow(),
		redlimit.PerHour(3).SlidingWindow(),
		redlimit.PerHour(3).SlidingLog(),
		redlimit.PerHour(3).TokenBucket(3),
	}
	for _, at := range []int64{-1_000_000_000, math.MinInt64, 1<<52 + 1, 1<<53 + 3, math.MaxInt64 - 8000} {
		for _, l := range limits {
			req := []redlimit.Request{{Key: fmt.Sprintf("t%d", at), Limit: l, Cost: 1}}
			admitted := 0
			for i := range int64(8) {
				// A millisecond apart, as the clock would read them.
				keys, args := s.DecisionArgs(req, at+1000*i)
				reply, err := script.Exec(ctx, client, keys, args).AsIntSlice()
				if err != nil || len(reply) != 6 {
					t.Fatalf("at %d, %s, call %d: %v, %v", at, l, i, reply, err)
				}
				if reply[1] == 1 {
					admitted++
				}
			}
			if admitted != 3 {
				t.Errorf("at %d µs, %s: %d of 8 admitted, want 3", at, l, admitted)
			}
		}
	}
}

// decisionScript returns a rueidis client of d's own, closed when t ends,
// and the decision script, to run it with the arguments a Store gives it
// (DecisionArgs).
func decisionScript(t *testing.T, d deployment) (rueidis.Client, *rueidis.Lua) {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: d.addrs(t), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client, rueidis.NewLuaScript(redisstore.Script())
}
