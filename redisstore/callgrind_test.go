package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// TestCallgrindCost counts the instructions redis-server executes per
// sliding-log decision, which, unlike its time, does not move with the
// machine's load. It runs only with REDLIMIT_CALLGRIND=<addr>,<pid>: a
// redis-server of its own started under
//
//	valgrind --tool=callgrind --instr-atstart=no redis-server --port <port> --save '' --appendonly no
//
// which it empties (FLUSHALL) and whose instrumentation it switches on
// around each case only (callgrind_control), so what is counted is the
// server's whole work for the calls: reading the request, the script, the
// reply (system calls excluded). Each case fills its keys first (3 entries each, all live),
// then makes its calls one after another; it logs instructions per
// decision. The figures are in docs/BENCHMARKS.md.
func TestCallgrindCost(t *testing.T) {
	spec := os.Getenv("REDLIMIT_CALLGRIND")
	if spec == "" {
		t.Skip("REDLIMIT_CALLGRIND=<addr>,<pid> not set")
	}
	addr, pid, _ := strings.Cut(spec, ",")
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ConnWriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	ctl := func(args ...string) string {
		out, err := exec.Command("callgrind_control", append(args, pid)...).CombinedOutput()
		if err != nil {
			t.Fatalf("callgrind_control %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	// measure counts the instructions of run(0..calls-1), each making per
	// decisions.
	measure := func(name string, calls, per int, run func(i int)) {
		if only := os.Getenv("REDLIMIT_CALLGRIND_ONLY"); only != "" && !strings.Contains(name, only) {
			return
		}
		ctl("-z")
		ctl("-i", "on")
		for i := range calls {
			run(i)
		}
		if os.Getenv("REDLIMIT_CALLGRIND_DUMP") != "" {
			ctl("--dump=" + strings.ReplaceAll(name, " ", "_"))
		}
		out := ctl("-e", "Ir") // only while instrumentation is on
		ctl("-i", "off")
		var total float64
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "Th" {
				x, err := strconv.ParseFloat(strings.ReplaceAll(f[2], ",", ""), 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				total += x
			}
		}
		t.Logf("%-44s %8.0f instructions per decision", name, total/float64(calls*per))
	}
	// Keys of an earlier run expiring, or the keyspace growing, would be
	// counted with the calls: the server starts each run empty.
	if err := client.Do(ctx, client.B().Flushall().Sync().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const keys = 1000
	p := "cg" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	single, err := redisstore.New(client, redisstore.WithBatching(false), redisstore.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	logLimit := redlimit.PerMinute(redlimit.MaxLogCount).SlidingLog()
	allow := func(key string, l redlimit.Limit, cost int64, want bool) {
		r, err := single.AllowN(ctx, key, l, cost)
		if err != nil || r.Allowed != want {
			t.Fatalf("%s: %+v, %v: want allowed %v", key, r, err, want)
		}
	}
	for i := range 3 * keys {
		allow("u"+strconv.Itoa(i%keys), logLimit, 1, true)
	}
	measure("sliding_log allowed, cost 1, unbatched", 2*keys, 1, func(i int) { allow("u"+strconv.Itoa(i%keys), logLimit, 1, true) })

	deny := redlimit.PerHour(3).SlidingLog()
	for i := range 3 * keys {
		allow("d"+strconv.Itoa(i%keys), deny, 1, true)
	}
	measure("sliding_log denied, cost 1, unbatched", keys, 1, func(i int) { allow("d"+strconv.Itoa(i%keys), deny, 1, false) })

	// A key in debt (a debit of MaxCost beyond its count of 3): a denial
	// waits for a unit about 2^40 on.
	for i := range keys / 10 {
		key := "x" + strconv.Itoa(i)
		for range 3 {
			allow(key, deny, 1, true)
		}
		if _, err := single.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: deny, Cost: redlimit.MaxCost, Debit: true}}); err != nil {
			t.Fatal(err)
		}
	}
	measure("sliding_log denied in debt, cost 1, unbatched", keys/10, 1, func(i int) { allow("x"+strconv.Itoa(i%(keys/10)), deny, 1, false) })

	const batch = 64
	reqs := make([]redlimit.Request, batch)
	batchKeys := func(i int) []redlimit.Request {
		for j := range reqs {
			reqs[j] = redlimit.Request{Key: "b" + strconv.Itoa((i*batch+j)%keys), Limit: logLimit, Cost: 1}
		}
		return reqs
	}
	decide := func(i int) {
		res, err := single.DecideBatch(ctx, batchKeys(i), nil)
		if err != nil || !res[0].Allowed || !res[batch-1].Allowed {
			t.Fatalf("%+v, %v", res, err)
		}
	}
	for i := range 3 * keys / batch {
		decide(i)
	}
	measure("sliding_log allowed, cost 1, in a batch of 64", 2*keys/batch, batch, decide)

	denyKeys := func(i int) []redlimit.Request {
		for j := range reqs {
			reqs[j] = redlimit.Request{Key: "d" + strconv.Itoa((i*batch+j)%keys), Limit: deny, Cost: 1}
		}
		return reqs
	}
	measure("sliding_log denied, cost 1, in a batch of 64", keys/batch, batch, func(i int) {
		res, err := single.DecideBatch(ctx, denyKeys(i), nil)
		if err != nil || res[0].Allowed || res[batch-1].Allowed {
			t.Fatalf("%+v, %v", res, err)
		}
	})

	// A hot key at its limit: 64 denials on one key, a run of the batch
	// script, of cost 1 (the first live entry) and of cost 2 (the second
	// live unit, a search by rank).
	for _, cost := range []int64{1, 2} {
		for j := range reqs {
			reqs[j] = redlimit.Request{Key: "d0", Limit: deny, Cost: cost}
		}
		measure("sliding_log denied, cost "+strconv.FormatInt(cost, 10)+", a run of 64 on one key", keys/batch, batch, func(i int) {
			res, err := single.DecideBatch(ctx, reqs, nil)
			if err != nil || res[0].Allowed || res[batch-1].Allowed {
				t.Fatalf("%+v, %v", res, err)
			}
		})
	}

	// A hot key far below its limit: a run of 64 allowed decisions on one
	// key, per algorithm (the batch script reads and writes it once).
	for _, l := range []redlimit.Limit{
		redlimit.PerMinute(1_000_000_000).FixedWindow(),
		redlimit.PerMinute(1_000_000_000).SlidingWindow(),
		redlimit.PerMinute(1_000_000_000).TokenBucket(1_000_000_000),
		redlimit.Per(redlimit.MaxLogCount, 100*time.Millisecond).SlidingLog(),
		redlimit.PerCalendar(1_000_000_000, redlimit.Month, "Europe/Berlin"),
	} {
		name := costName(l)
		for j := range reqs {
			reqs[j] = redlimit.Request{Key: "hot" + name, Limit: l, Cost: 1}
		}
		for _, size := range []int{2, 16, 64} {
			measure(name+" allowed, cost 1, a run of "+strconv.Itoa(size)+" on one key", keys/batch, size, func(i int) {
				res, err := single.DecideBatch(ctx, reqs[:size], nil)
				if err != nil || !res[0].Allowed || !res[size-1].Allowed {
					t.Fatalf("%+v, %v", res, err)
				}
			})
		}
	}

	// The other algorithms, one call each, for comparison.
	for _, l := range []redlimit.Limit{
		redlimit.PerMinute(1000).FixedWindow(),
		redlimit.PerMinute(1000).SlidingWindow(),
		redlimit.PerMinute(1000).TokenBucket(1000),
		redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin"),
	} {
		name := costName(l)
		for i := range keys {
			allow(name+strconv.Itoa(i), l, 1, true)
		}
		measure(name+" allowed, cost 1, unbatched", keys, 1, func(i int) { allow(name+strconv.Itoa(i%keys), l, 1, true) })
	}

	// The other calls, one after another, unbatched: AllowAll of two
	// limits, a debit, Admit and the Refund of its Grant, Reset and
	// DebitOnce, each on keys of its own.
	fw, bucket := redlimit.PerMinute(1_000_000_000).FixedWindow(), redlimit.PerMinute(1_000_000_000).TokenBucket(1_000_000_000)
	allowAll := func(name string, reqs func(k string) []redlimit.Request) func(i int) {
		return func(i int) {
			d, err := single.AllowAll(ctx, reqs(name+strconv.Itoa(i%keys)))
			if err != nil || !d.Allowed {
				t.Fatalf("%+v, %v", d, err)
			}
		}
	}
	two := allowAll("two", func(k string) []redlimit.Request {
		return []redlimit.Request{{Key: k, Limit: fw, Cost: 1}, {Key: k, Limit: bucket, Cost: 1}}
	})
	for i := range keys {
		two(i)
	}
	measure("AllowAll of fixed_window and token_bucket, unbatched", keys, 1, two)
	debit := allowAll("debit", func(k string) []redlimit.Request {
		return []redlimit.Request{{Key: k, Limit: fw, Cost: 1, Debit: true}}
	})
	for i := range keys {
		debit(i)
	}
	measure("fixed_window debit, cost 1, unbatched", keys, 1, debit)
	grants := make([]*redlimit.Grant, keys)
	measure("Admit of a token_bucket, cost 1, unbatched", keys, 1, func(i int) {
		g, err := single.Admit(ctx, []redlimit.Request{{Key: "admit" + strconv.Itoa(i), Limit: bucket, Cost: 1}})
		if err != nil || !g.Allowed {
			t.Fatalf("%+v, %v", g, err)
		}
		grants[i] = g
	})
	measure("Refund of that Admit, unbatched", keys, 1, func(i int) {
		if err := single.Refund(ctx, grants[i], []int64{1}); err != nil {
			t.Fatal(err)
		}
	})
	measure("Reset of a fixed_window, unbatched", keys, 1, func(i int) {
		if err := single.Reset(ctx, "two"+strconv.Itoa(i), fw); err != nil {
			t.Fatal(err)
		}
	})
	measure("DebitOnce of a fixed_window, unbatched", keys, 1, func(i int) {
		if _, counted, err := single.DebitOnce(ctx, redlimit.Request{Key: "once" + strconv.Itoa(i), Limit: fw, Cost: 1}, "id"+strconv.Itoa(i)); err != nil || !counted {
			t.Fatalf("%v, %v", counted, err)
		}
	})

	textbookScript := rueidis.NewLuaScript(textbook)
	tb := func(i int) {
		args := []string{strconv.FormatInt(time.Now().UnixMicro(), 10), "60000000", strconv.Itoa(redlimit.MaxLogCount), "60"}
		if err := textbookScript.Exec(ctx, client, []string{p + "t" + strconv.Itoa(i%keys)}, args).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 * keys {
		tb(i)
	}
	measure("textbook script (client clock), allowed", 2*keys, 1, tb)

	// The Redis calls alone, in a batch of 64 keys and without the logic
	// around them: what a batched sliding-log decision cannot cost less
	// than, whatever its Lua, against the textbook script's whole call.
	// Each writes a new entry per key and call, as an allowed decision does.
	for _, c := range []struct{ name, src string }{
		{"the calls alone: a sliding log's four", `
for i = 1, #KEYS do
  redis.call('ZRANGE', KEYS[i], '-1', '-1', 'WITHSCORES')
  redis.call('ZREVRANGEBYSCORE', KEYS[i], ARGV[2], '-inf', 'LIMIT', '0', '1')
  redis.call('ZADD', KEYS[i], ARGV[1], ARGV[3] .. i)
  redis.call('PEXPIRE', KEYS[i], '60000')
end
return 1`},
		{"the calls alone: the textbook's four", `
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[2])
  redis.call('ZCARD', KEYS[i])
  redis.call('ZADD', KEYS[i], ARGV[1], ARGV[3] .. i)
  redis.call('EXPIRE', KEYS[i], '60')
end
return 1`},
		// Members that hold their time, ordered by it (scores all 0), and
		// no PEXPIRE within a slot: a format not built (docs/BENCHMARKS.md).
		{"the calls alone: three, time in the member", `
for i = 1, #KEYS do
  redis.call('ZRANGE', KEYS[i], '-1', '-1')
  redis.call('ZRANGE', KEYS[i], '(' .. ARGV[2], '-', 'BYLEX', 'REV', 'LIMIT', '0', '1')
  redis.call('ZADD', KEYS[i], '0', ARGV[1] .. ':' .. ARGV[3] .. i)
end
return 1`},
	} {
		s := rueidis.NewLuaScript(c.src)
		kp := p + "c" + strconv.Itoa(len(c.name)) + ":"
		ks := make([]string, batch)
		run := func(i int) {
			for j := range ks {
				ks[j] = kp + strconv.Itoa((i*batch+j)%keys)
			}
			now := time.Now().UnixMicro()
			args := []string{strconv.FormatInt(now, 10), strconv.FormatInt(now-60_000_000, 10), strconv.Itoa(i) + ":"}
			if err := s.Exec(ctx, client, ks, args).Error(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 * keys / batch {
			run(i)
		}
		measure(c.name+", in a batch of 64", 2*keys/batch, batch, run)
	}

	empty := rueidis.NewLuaScript(`return {1,2,3,4,5}`)
	measure("any EVALSHA (return {1,2,3,4,5})", keys, 1, func(i int) {
		if err := empty.Exec(ctx, client, []string{p + "e"}, nil).Error(); err != nil {
			t.Fatal(err)
		}
	})
}

// costName names l's cases: its algorithm, or its calendar.
func costName(l redlimit.Limit) string {
	if !l.Calendar.IsZero() {
		return "calendar " + l.Calendar.Unit.String()
	}
	return l.Algorithm.String()
}
