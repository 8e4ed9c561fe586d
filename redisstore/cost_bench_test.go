package redisstore_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// BenchmarkScriptCost measures what one decision costs inside Redis: each
// case runs on a server of its own, and reports the script's mean time per
// call from INFO commandstats (redis-µs/call, Redis's usec_per_call of
// EVALSHA) beside the client's ns/op. Calls are made one after another.
//
// The cases cover the sliding log's paths (a cost of 1 allowed and denied,
// on logs of a few entries, on login-like logs of one or two, and on one
// of 50,000 entries, a large cost allowed and denied), the other
// algorithms' cost-1 allow and deny, the decision script on several limits
// of one key (AllowAll), and the textbook sliding log script
// (ZREMRANGEBYSCORE, ZCARD, ZADD, EXPIRE, with the client's clock), for
// reference; and debits (one-request AllowAll with Debit): of a cost of 1
// that fits, and on keys in debt, where a sliding log merges entries; a
// token bucket's allow on keys that hold a refund record, and Admit of a
// token bucket and of a fixed window. Run with -benchtime=5000x: the login
// case then makes two requests per key.
func BenchmarkScriptCost(b *testing.B) {
	const keys = 1000
	cases := []struct {
		name  string
		limit redlimit.Limit
		cost  int64
		keys  int
		fill  int64            // requests of cost 1 made on each key first
		also  []redlimit.Limit // more limits of the key, decided with limit by AllowAll
		debit bool             // a debit, made with AllowAll
	}{
		{"sliding_log/cost1_allow", redlimit.PerMinute(redlimit.MaxLogCount).SlidingLog(), 1, keys, 0, nil, false},
		{"sliding_log/cost1_allow_login", redlimit.PerHour(5).SlidingLog(), 1, 2 * keys, 0, nil, false},
		{"sliding_log/cost1_allow_50k_entries", redlimit.PerHour(redlimit.MaxLogCount).SlidingLog(), 1, 1, 50_000, nil, false},
		{"sliding_log/cost1_deny", redlimit.PerHour(100).SlidingLog(), 1, 100, 100, nil, false},
		{"sliding_log/cost1000_allow", redlimit.Per(redlimit.MaxLogCount, time.Millisecond).SlidingLog(), 1000, keys, 0, nil, false},
		{"sliding_log/cost50_deny_50k_entries", redlimit.PerHour(50_000).SlidingLog(), 50, 1, 50_000, nil, false},
		{"fixed_window/cost1_allow", redlimit.PerMinute(1e9).FixedWindow(), 1, keys, 0, nil, false},
		{"sliding_window/cost1_allow", redlimit.PerMinute(1e9).SlidingWindow(), 1, keys, 0, nil, false},
		{"token_bucket/cost1_allow", redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount), 1, keys, 0, nil, false},
		{"token_bucket/cost1_allow_refund_record", redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount), 1, keys, 0, nil, false},
		{"admit/token_bucket/cost1", redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount), 1, keys, 0, nil, false},
		{"admit/fixed_window/cost1", redlimit.PerMinute(1e9).FixedWindow(), 1, keys, 0, nil, false},
		{"fixed_window/cost1_deny", redlimit.PerHour(100).FixedWindow(), 1, 100, 100, nil, false},
		{"sliding_window/cost1_deny", redlimit.PerHour(100).SlidingWindow(), 1, 100, 100, nil, false},
		{"token_bucket/cost1_deny", redlimit.PerHour(100).TokenBucket(100), 1, 100, 100, nil, false},
		{"several/fixed_window+token_bucket_allow", redlimit.PerMinute(1e9).FixedWindow(), 1, keys, 0,
			[]redlimit.Limit{redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount)}, false},
		{"several/four_algorithms_allow", redlimit.PerMinute(1e9).FixedWindow(), 1, keys, 0,
			[]redlimit.Limit{redlimit.PerMinute(redlimit.MaxLogCount).SlidingLog(), redlimit.PerMinute(1e9).SlidingWindow(), redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount)}, false},
		{"debit/fixed_window/cost1_fits", redlimit.PerMinute(1e9).FixedWindow(), 1, keys, 0, nil, true},
		{"debit/sliding_window/cost1_fits", redlimit.PerMinute(1e9).SlidingWindow(), 1, keys, 0, nil, true},
		{"debit/token_bucket/cost1_fits", redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount), 1, keys, 0, nil, true},
		{"debit/sliding_log/cost1_fits", redlimit.PerMinute(redlimit.MaxLogCount).SlidingLog(), 1, keys, 0, nil, true},
		{"debit/fixed_window/cost1_in_debt", redlimit.PerHour(100).FixedWindow(), 1, 100, 100, nil, true},
		{"debit/token_bucket/cost1_in_debt", redlimit.PerHour(100).TokenBucket(100), 1, 100, 100, nil, true},
		{"debit/sliding_log/cost1_in_debt", redlimit.PerHour(100).SlidingLog(), 1, 100, 100, nil, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := redistest.Start(b)
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			s, err := redisstore.New(client)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			names := make([]string, c.keys)
			for i := range names {
				names[i] = "k" + strconv.Itoa(i)
				for range c.fill {
					if _, err := s.AllowN(ctx, names[i], c.limit, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			// "admit/": decided by Admit; "_refund_record": keys that an
			// Admit gave a token bucket's refund record first.
			admit := strings.HasPrefix(c.name, "admit/")
			if admit || strings.HasSuffix(c.name, "_refund_record") {
				for _, k := range names {
					if _, err := s.Admit(ctx, []redlimit.Request{{Key: k, Limit: c.limit, Cost: 1}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
				b.Fatal(err)
			}
			var reqs []redlimit.Request
			for _, l := range append([]redlimit.Limit{c.limit}, c.also...) {
				reqs = append(reqs, redlimit.Request{Limit: l, Cost: c.cost, Debit: c.debit})
			}
			b.ResetTimer()
			for i := range b.N {
				if admit {
					reqs[0].Key = names[i%len(names)]
					if _, err := s.Admit(ctx, reqs); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if len(reqs) == 1 && !c.debit {
					if _, err := s.AllowN(ctx, names[i%len(names)], c.limit, c.cost); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for j := range reqs {
					reqs[j].Key = names[i%len(names)]
				}
				if _, err := s.AllowAll(ctx, reqs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportScriptCost(b, srv, "evalsha")
		})
	}
	b.Run("textbook_sliding_log/cost1_allow", func(b *testing.B) {
		srv := redistest.Start(b)
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
		if err != nil {
			b.Fatal(err)
		}
		defer client.Close()
		script := rueidis.NewLuaScript(textbook)
		ctx := context.Background()
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			now := time.Now().UnixMicro()
			key := "textbook:" + strconv.Itoa(i%keys)
			args := []string{strconv.FormatInt(now, 10), "60000000", strconv.Itoa(redlimit.MaxLogCount), "60"}
			if err := script.Exec(ctx, client, []string{key}, args).Error(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportScriptCost(b, srv, "evalsha")
	})
}

// reportScriptCost reports the mean time per call of cmd from INFO
// commandstats as redis-µs/call, and how many Redis commands each call made
// inside the script (cmds/call: the calls of every other command in INFO
// commandstats, over cmd's); -test.v logs them command by command (calls
// and µs per script call).
func reportScriptCost(b *testing.B, srv *redistest.Server, cmd string) {
	b.Helper()
	stats := commandStats(b, srv)
	script, ok := stats[cmd]
	if !ok || script.calls == 0 {
		b.Fatalf("no %s in INFO commandstats", cmd)
	}
	b.ReportMetric(script.usec/script.calls, "redis-µs/call")
	var inner float64
	var detail strings.Builder
	for name, st := range stats {
		if name == cmd || !scriptCommand(name) {
			continue
		}
		inner += st.calls
		detail.WriteString(" " + name + "=" + strconv.FormatFloat(st.calls/script.calls, 'f', 2, 64) + "×" + strconv.FormatFloat(st.usec/st.calls, 'f', 2, 64) + "µs")
	}
	b.ReportMetric(inner/script.calls, "cmds/call")
	if testing.Verbose() {
		b.Log("per script call:" + detail.String())
	}
}

// scriptCommand reports whether a command in INFO commandstats can come
// from inside a script: not the scripts themselves nor what clients and
// the benchmarks send around them (HELLO, CONFIG, INFO, SCRIPT, CLIENT).
func scriptCommand(name string) bool {
	base, _, _ := strings.Cut(name, "|")
	switch base {
	case "eval", "evalsha", "hello", "config", "info", "script", "client", "ping":
		return false
	}
	return true
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec float64 }

// commandStats returns INFO commandstats by command name (lower case).
func commandStats(tb testing.TB, srv *redistest.Server) map[string]cmdStat {
	tb.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatal(err)
	}
	stats := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(strings.TrimSpace(line), "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			switch k {
			case "calls":
				st.calls = x
			case "usec":
				st.usec = x
			}
		}
		stats[name] = st
	}
	return stats
}

// BenchmarkWorstCaseScript measures the most expensive single calls the
// store makes, for docs/SECURITY.md, each on a server of its own: the
// script's mean and longest time per call from INFO commandstats and the
// slow log (redis-µs/call, redis-max-µs), and the Redis process's CPU time
// per call from INFO cpu (redis-cpu-µs/call: user and system, network
// included), beside the client's ns/op. Calls are made one after another.
//
//   - cost1/<algorithm>: an ordinary decision, for comparison;
//   - maxcost/<algorithm>: a new key of each algorithm asked for its
//     largest cost (MaxCost on a MaxCount limit; a sliding log's
//     MaxLogCount, and MaxCost, which it denies for ever);
//   - allowall64_log100k/denied: AllowAll of redlimit.MaxRequests (64)
//     sliding logs, each at MaxLogCount live entries of one unit, each
//     asked for MaxLogCount units: every limit searches its log for the
//     retry-after;
//   - allowall64_log100k/allowed: the same logs with half their entries
//     expired, each asked for one unit: every limit counts from deep in
//     its log, then appends and trims;
//   - batch64_log100k/denied and /allowed: the same 64 logs, each asked
//     the same by one of 64 AllowN calls that form one batch (the batch
//     cap): the longest batch script call;
//   - batch64_cost1/fixed_window_one_key: an ordinary batch, 64 calls on
//     one key;
//   - debit_maxcost/<algorithm>: a debit of MaxCost on one key of a
//     MaxCount limit (a sliding log's MaxLogCount), again and again: the
//     first counted, the next up to the saturation bound, then nothing;
//   - allowall64_log100k/debit_half: AllowAll of 64 debits of
//     MaxLogCount/2 on the full logs, a microsecond apart: every limit
//     searches its log for the retry-after (the (c'+n-L)-th unit, deep in
//     the log), merges two entries and appends;
//   - refund63_rewrite64: the refund a Cluster AllowAll makes for a group
//     of 63 sliding logs of one identifier (the 64th limit, on another
//     slot, denied), each with 64 entries made after the request's:
//     the most a refund rewrites (run on a standalone server: the script
//     and its commands are the same).
//
// Run with -benchtime=200x or so: the 64-log cases fill 6.4 million
// sorted-set entries (about 600 MB in Redis) first.
func BenchmarkWorstCaseScript(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	type setup struct {
		srv *redistest.Server
		s   *redisstore.Store
		now *atomic.Int64 // µs since t0
		ctx context.Context
		raw rueidis.Client
	}
	open := func(b *testing.B) *setup {
		srv := redistest.Start(b)
		// Copying a log of MaxLogCount entries takes tens of ms: more
		// than rueidis's default allows a pipeline on a busy machine.
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ConnWriteTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(client.Close)
		now := new(atomic.Int64)
		s, err := redisstore.New(client, redisstore.WithClock(func() time.Time { return t0.Add(time.Duration(now.Load()) * time.Microsecond) }))
		if err != nil {
			b.Fatal(err)
		}
		return &setup{srv: srv, s: s, now: now, ctx: context.Background(), raw: client}
	}
	one := func(name string, l redlimit.Limit, cost int64, newKey bool) {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			if _, err := st.s.AllowN(st.ctx, "warm", l, 1); err != nil { // loads the script
				b.Fatal(err)
			}
			cpu0 := startWorstCase(b, st.srv)
			for i := range b.N {
				st.now.Add(1)
				key := "k"
				if newKey {
					key = "k" + strconv.Itoa(i)
				}
				if _, err := st.s.AllowN(st.ctx, key, l, cost); err != nil {
					b.Fatal(err)
				}
			}
			reportWorstCase(b, st.srv, cpu0)
		})
	}
	big := redlimit.Per(redlimit.MaxCount, time.Hour)
	one("cost1/fixed_window", redlimit.PerMinute(1e9).FixedWindow(), 1, false)
	one("cost1/sliding_window", redlimit.PerMinute(1e9).SlidingWindow(), 1, false)
	one("cost1/token_bucket", redlimit.PerSecond(1e6).TokenBucket(1e6), 1, false)
	one("cost1/sliding_log", redlimit.PerMinute(redlimit.MaxLogCount).SlidingLog(), 1, false)
	one("maxcost/fixed_window", big.FixedWindow(), redlimit.MaxCost, true)
	one("maxcost/sliding_window", big.SlidingWindow(), redlimit.MaxCost, true)
	one("maxcost/token_bucket", big.TokenBucket(redlimit.MaxCount), redlimit.MaxCost, true)
	one("maxcost/sliding_log_MaxLogCount", redlimit.PerHour(redlimit.MaxLogCount).SlidingLog(), redlimit.MaxLogCount, true)
	one("maxcost/sliding_log_MaxCost_denied", redlimit.PerHour(redlimit.MaxLogCount).SlidingLog(), redlimit.MaxCost, true)
	debitOne := func(name string, l redlimit.Limit) {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			if _, err := st.s.AllowN(st.ctx, "warm", l, 1); err != nil {
				b.Fatal(err)
			}
			reqs := []redlimit.Request{{Key: "k", Limit: l, Cost: redlimit.MaxCost, Debit: true}}
			cpu0 := startWorstCase(b, st.srv)
			for range b.N {
				st.now.Add(1)
				if _, err := st.s.AllowAll(st.ctx, reqs); err != nil {
					b.Fatal(err)
				}
			}
			reportWorstCase(b, st.srv, cpu0)
		})
	}
	debitOne("debit_maxcost/fixed_window", big.FixedWindow())
	debitOne("debit_maxcost/sliding_window", big.SlidingWindow())
	debitOne("debit_maxcost/token_bucket", redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount))
	debitOne("debit_maxcost/sliding_log", redlimit.PerHour(redlimit.MaxLogCount).SlidingLog())

	// fullLogs fills the sliding logs of 64 keys with MaxLogCount entries
	// of one unit at t0+1..t0+MaxLogCount µs, as the store writes them
	// (lua/log.lua), and returns the requests for them.
	const window = time.Hour
	logLimit := redlimit.Per(redlimit.MaxLogCount, window).SlidingLog()
	fullLogs := func(b *testing.B, st *setup, cost int64) []redlimit.Request {
		reqs := make([]redlimit.Request, redlimit.MaxRequests)
		keyOf := func(i int) string {
			return redisstore.DefaultPrefix + "{log" + strconv.Itoa(i) + "}:sl:" + strconv.FormatInt(window.Microseconds(), 10)
		}
		for i := range reqs {
			reqs[i] = redlimit.Request{Key: "log" + strconv.Itoa(i), Limit: logLimit, Cost: cost}
		}
		const chunk = 1000
		var cmds rueidis.Commands
		for lo := 1; lo <= redlimit.MaxLogCount; lo += chunk {
			c := st.raw.B().Zadd().Key(keyOf(0)).ScoreMember()
			if lo == 1 {
				c = c.ScoreMember(math.Inf(-1), "b")
			}
			for j := lo; j < lo+chunk && j <= redlimit.MaxLogCount; j++ {
				c = c.ScoreMember(float64(t0.UnixMicro()+int64(j)), strconv.Itoa(j))
			}
			cmds = append(cmds, c.Build())
		}
		for i := 1; i < len(reqs); i++ {
			cmds = append(cmds, st.raw.B().Copy().Source(keyOf(0)).Destination(keyOf(i)).Build())
		}
		for _, c := range cmds {
			if err := st.raw.Do(st.ctx, c).Error(); err != nil {
				b.Fatal(err)
			}
		}
		return reqs
	}
	b.Run("allowall64_log100k/denied", func(b *testing.B) {
		st := open(b)
		reqs := fullLogs(b, st, redlimit.MaxLogCount)
		st.now.Store(redlimit.MaxLogCount + 1)
		d, err := st.s.AllowAll(st.ctx, reqs)
		if err != nil || d.Allowed || d.Results[0].RetryAfter != window-time.Microsecond {
			b.Fatalf("%+v, %v: want every log full, each denied until its newest entry expires", d.Results[0], err)
		}
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			if _, err := st.s.AllowAll(st.ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	b.Run("allowall64_log100k/allowed", func(b *testing.B) {
		st := open(b)
		reqs := fullLogs(b, st, 1)
		st.now.Store(window.Microseconds() + redlimit.MaxLogCount/2)
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			st.now.Add(1)
			d, err := st.s.AllowAll(st.ctx, reqs)
			if err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d.Results[0], err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	// The worst batch: 64 AllowN calls (maxBatch) on those logs, decided
	// in one run of the batch script.
	b.Run("batch64_log100k/denied", func(b *testing.B) {
		st := open(b)
		reqs := fullLogs(b, st, redlimit.MaxLogCount)
		st.now.Store(redlimit.MaxLogCount + 1)
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			res, err := st.s.DecideBatch(st.ctx, reqs, nil)
			if err != nil || res[0].Allowed || res[63].RetryAfter != window-time.Microsecond {
				b.Fatalf("%+v, %v: want every log full, each denied until its newest entry expires", res, err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	b.Run("batch64_log100k/allowed", func(b *testing.B) {
		st := open(b)
		reqs := fullLogs(b, st, 1)
		st.now.Store(window.Microseconds() + redlimit.MaxLogCount/2)
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			st.now.Add(1)
			res, err := st.s.DecideBatch(st.ctx, reqs, nil)
			if err != nil || !res[0].Allowed {
				b.Fatalf("%+v, %v", res, err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	// An ordinary batch, for comparison: 64 fixed windows of one hot key.
	b.Run("batch64_cost1/fixed_window_one_key", func(b *testing.B) {
		st := open(b)
		reqs := make([]redlimit.Request, redlimit.MaxRequests)
		for i := range reqs {
			reqs[i] = redlimit.Request{Key: "hot", Limit: redlimit.PerMinute(1e9).FixedWindow(), Cost: 1}
		}
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			st.now.Add(1)
			if _, err := st.s.DecideBatch(st.ctx, reqs, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	b.Run("allowall64_log100k/debit_half", func(b *testing.B) {
		st := open(b)
		reqs := fullLogs(b, st, redlimit.MaxLogCount/2)
		for i := range reqs {
			reqs[i].Debit = true
		}
		st.now.Store(redlimit.MaxLogCount + 1)
		cpu0 := startWorstCase(b, st.srv)
		for range b.N {
			st.now.Add(1)
			d, err := st.s.AllowAll(st.ctx, reqs)
			if err != nil || d.Allowed {
				b.Fatalf("%+v, %v", d.Results[0], err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
	})
	b.Run("refund63_rewrite64", func(b *testing.B) {
		st := open(b)
		const limits, later = redlimit.MaxRequests - 1, 64
		reqs := make([]redlimit.Request, limits)
		for i := range reqs {
			reqs[i] = redlimit.Request{Key: "r", Limit: redlimit.Per(1000, window+time.Duration(i)*time.Microsecond).SlidingLog(), Cost: 1}
		}
		d, err := st.s.AllowAll(st.ctx, reqs)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		at := t0.UnixMicro()
		for range later {
			st.now.Add(1)
			if _, err := st.s.AllowAll(st.ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
		// One copy of the 63 logs per refund, made before the clock starts.
		var cmds rueidis.Commands
		copies := make([][]redlimit.Request, b.N)
		for n := range b.N {
			copies[n] = make([]redlimit.Request, limits)
			id := "r" + strconv.Itoa(n)
			for i, r := range reqs {
				copies[n][i] = redlimit.Request{Key: id, Limit: r.Limit, Cost: 1}
				suffix := "}:sl:" + strconv.FormatInt(r.Limit.Period.Microseconds(), 10)
				cmds = append(cmds, st.raw.B().Copy().Source(redisstore.DefaultPrefix+"{r"+suffix).Destination(redisstore.DefaultPrefix+"{"+id+suffix).Build())
			}
		}
		for _, r := range st.raw.DoMulti(st.ctx, cmds...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
		st.now.Add(1)
		cpu0 := startWorstCase(b, st.srv)
		for n := range b.N {
			if err := st.s.RefundGroup(st.ctx, copies[n], d.Results, at); err != nil {
				b.Fatal(err)
			}
		}
		reportWorstCase(b, st.srv, cpu0)
		// Each refund gave back its unit: of the 65 taken, 64 stay
		// (and Peek counts its own request).
		res, err := st.s.Peek(st.ctx, "r0", reqs[limits-1].Limit, 1)
		if want := int64(1000 - later - 1); err != nil || res.Remaining != want {
			b.Fatalf("after the refund: %+v, %v: want %d remaining", res, err, want)
		}
	})
}

// startWorstCase resets srv's statistics, has it track the median and
// the longest EVALSHA call, and starts the benchmark's timer. It returns
// the Redis process's CPU time so far, in seconds.
func startWorstCase(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	for _, args := range [][]string{
		{"CONFIG", "SET", "latency-tracking-info-percentiles", "50 100"},
		{"CONFIG", "RESETSTAT"},
	} {
		if _, err := srv.Do(args...); err != nil {
			b.Fatal(err)
		}
	}
	_, cpu := redisStats(b, srv)
	b.ResetTimer()
	return cpu
}

// reportWorstCase stops the timer and reports EVALSHA's mean, median and
// longest time per call (redis-µs/call, redis-p50-µs, redis-max-µs), and
// the Redis process's CPU time per EVALSHA call since cpu0
// (redis-cpu-µs/call).
func reportWorstCase(b *testing.B, srv *redistest.Server, cpu0 float64) {
	b.Helper()
	b.StopTimer()
	stats, cpu := redisStats(b, srv)
	if stats["calls"] == 0 {
		b.Fatal("no EVALSHA in INFO commandstats")
	}
	b.ReportMetric(stats["usec_per_call"], "redis-µs/call")
	b.ReportMetric(stats["p50"], "redis-p50-µs")
	b.ReportMetric(stats["p100"], "redis-max-µs")
	b.ReportMetric((cpu-cpu0)*1e6/stats["calls"], "redis-cpu-µs/call")
}

// redisStats returns EVALSHA's fields in INFO commandstats and
// latencystats, and the Redis process's CPU time (user and system) in
// seconds.
func redisStats(b *testing.B, srv *redistest.Server) (map[string]float64, float64) {
	b.Helper()
	info, err := srv.Do("INFO", "all")
	if err != nil {
		b.Fatal(err)
	}
	stats := map[string]float64{}
	var cpu float64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, prefix := range []string{"cmdstat_evalsha:", "latency_percentiles_usec_evalsha:"} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				for _, f := range strings.Split(rest, ",") {
					k, v, _ := strings.Cut(f, "=")
					x, _ := strconv.ParseFloat(v, 64)
					stats[k] = x
				}
			}
		}
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				x, _ := strconv.ParseFloat(v, 64)
				cpu += x
			}
		}
	}
	return stats, cpu
}

// textbook is the seed's sliding log, for reference: the client's clock
// (ARGV[1], µs; ARGV[2] the window, µs), members that collide within a
// microsecond, no remaining count or retry-after, an unbounded trim
// (bench/'s textbookLog is the same script, in its own module).
const textbook = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return 1
end
return 0`
