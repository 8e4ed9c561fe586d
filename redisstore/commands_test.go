package redisstore_test

import (
	"context"
	"maps"
	"testing"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// TestScriptCommandCounts pins the Redis commands one single-limit decision
// makes inside its script, by command, on the common paths (INFO
// commandstats deltas on a server of its own, the server's clock, one call
// at a time): every redis.call costs Redis CPU beyond the command itself,
// so a path that makes one more is a regression to be seen here (and one
// that makes fewer, an improvement to be written down here).
func TestScriptCommandCounts(t *testing.T) {
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := redisstore.New(client, redisstore.WithBatching(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	perHour := redlimit.PerHour(100)
	steps := []struct {
		name  string
		limit redlimit.Limit
		key   string
		fill  int64 // requests of cost 1 made on the key first
		peek  bool
		allow bool // the answer expected
		want  map[string]float64
	}{
		{"sliding_log/fresh_key", perHour.SlidingLog(), "sl-fresh", 0, false, true,
			map[string]float64{"time": 1, "zrange": 1, "zadd": 1, "pexpire": 1}},
		{"sliding_log/two_entries", perHour.SlidingLog(), "sl-few", 1, false, true,
			map[string]float64{"time": 1, "zrange": 1, "zrevrangebyscore": 1, "zadd": 1, "pexpire": 1}},
		{"sliding_log/many_entries", perHour.SlidingLog(), "sl-many", 20, false, true,
			map[string]float64{"time": 1, "zrange": 1, "zrevrangebyscore": 1, "zadd": 1, "pexpire": 1}},
		{"sliding_log/denied", perHour.SlidingLog(), "sl-full", 100, false, false,
			map[string]float64{"time": 1, "zrange": 1, "zrevrangebyscore": 1, "zrangebyscore": 1}},
		{"sliding_log/peek", perHour.SlidingLog(), "sl-peek", 20, true, true,
			map[string]float64{"time": 1, "zrange": 1, "zrevrangebyscore": 1}},
		{"fixed_window/allowed", perHour.FixedWindow(), "fw", 1, false, true,
			map[string]float64{"time": 1, "hincrby": 1}},
		{"fixed_window/denied", perHour.FixedWindow(), "fw-full", 100, false, false,
			map[string]float64{"time": 1, "hincrby": 2}},
		{"sliding_window/allowed", perHour.SlidingWindow(), "sw", 1, false, true,
			map[string]float64{"time": 1, "hgetall": 1, "hincrby": 1}},
		{"token_bucket/allowed", perHour.TokenBucket(100), "tb", 1, false, true,
			map[string]float64{"time": 1, "get": 1, "set": 1}},
	}
	for _, st := range steps {
		for range st.fill {
			if r, err := s.AllowN(ctx, st.key, st.limit, 1); err != nil || !r.Allowed {
				t.Fatalf("%s: filling: %+v, %v", st.name, r, err)
			}
		}
		before := innerCommands(t, srv)
		var r redlimit.Result
		if st.peek {
			r, err = s.Peek(ctx, st.key, st.limit, 1)
		} else {
			r, err = s.AllowN(ctx, st.key, st.limit, 1)
		}
		if err != nil || r.Allowed != st.allow {
			t.Fatalf("%s: %+v, %v: want allowed %v", st.name, r, err, st.allow)
		}
		got := innerCommands(t, srv)
		for name, n := range before {
			got[name] -= n
			if got[name] == 0 {
				delete(got, name)
			}
		}
		if !maps.Equal(got, st.want) {
			t.Errorf("%s: Redis commands inside the script %v, want %v", st.name, got, st.want)
		}
	}
}

// innerCommands returns the calls of every command in INFO commandstats
// that a script can make (scriptCommand), by name.
func innerCommands(t *testing.T, srv *redistest.Server) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for name, st := range commandStats(t, srv) {
		if scriptCommand(name) {
			out[name] = st.calls
		}
	}
	return out
}
