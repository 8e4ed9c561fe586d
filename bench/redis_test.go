package bench

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

const (
	// redisCallers is how many goroutines call the limiter at once.
	redisCallers = 64
	// redisKeys is how many identifiers the callers spread over.
	redisKeys = 10_000
	// redisPerMinute is each key's limit: far above what one key receives
	// (a few hundred requests per benchmark), so calls take the allow path.
	// It is the same for every case; a sliding log may not count above
	// redlimit.MaxLogCount (100,000).
	redisPerMinute = redlimit.MaxLogCount
)

// remoteLimiter is one Redis-backed limiter under test.
type remoteLimiter struct {
	allow func(ctx context.Context, key string) (bool, error)
	close func()
}

type redisCase struct {
	name string
	new  func(b *testing.B, addr string) remoteLimiter
	keys int // how many identifiers the callers spread over; 0 for redisKeys
}

func rueidisClient(b *testing.B, addr string) rueidis.Client {
	// Default options: concurrent commands are auto-pipelined on one
	// connection.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func goRedisClient(addr string) *redis.Client {
	// A connection for each caller, so no caller waits for the pool.
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: redisCallers})
}

func redlimitRemote(s *redisstore.Store, l redlimit.Limit, closeClient func()) remoteLimiter {
	return remoteLimiter{
		allow: func(ctx context.Context, key string) (bool, error) {
			r, err := s.AllowN(ctx, key, l, 1)
			return r.Allowed, err
		},
		close: closeClient,
	}
}

func redlimitRueidis(l redlimit.Limit, opts ...redisstore.Option) func(*testing.B, string) remoteLimiter {
	return func(b *testing.B, addr string) remoteLimiter {
		c := rueidisClient(b, addr)
		s, err := redisstore.New(c, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return redlimitRemote(s, l, c.Close)
	}
}

func redlimitGoRedis(l redlimit.Limit) func(*testing.B, string) remoteLimiter {
	return func(b *testing.B, addr string) remoteLimiter {
		c := goRedisClient(addr)
		s, err := redisstore.NewGoRedis(c)
		if err != nil {
			b.Fatal(err)
		}
		return redlimitRemote(s, l, func() { c.Close() })
	}
}

func redisRate(b *testing.B, addr string) remoteLimiter {
	return redisRateAt(redis_rate.PerMinute(redisPerMinute))(b, addr)
}

func redisRateAt(limit redis_rate.Limit) func(*testing.B, string) remoteLimiter {
	return func(b *testing.B, addr string) remoteLimiter {
		return redisRateLimiter(addr, limit)
	}
}

func redisRateLimiter(addr string, limit redis_rate.Limit) remoteLimiter {
	c := goRedisClient(addr)
	l := redis_rate.NewLimiter(c)
	return remoteLimiter{
		allow: func(ctx context.Context, key string) (bool, error) {
			r, err := l.Allow(ctx, key, limit)
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		},
		close: func() { c.Close() },
	}
}

// textbookLog is the seed's textbook sliding log, for reference: trim the
// expired members, count, add one. It is not what redlimit's sliding log
// answers: the time is the caller's clock (ARGV[1], µs), not Redis's, so
// servers with skewed clocks disagree; the member is that time, so two
// requests in one microsecond make one member and the second is not
// counted; it answers allowed or not, with no remaining count nor honest
// retry-after; and a call trims however many members expired, without
// bound. ARGV: now µs, window µs, limit, TTL seconds.
const textbookLog = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return 1
end
return 0`

// textbookSlidingLog runs textbookLog through rueidis (auto-pipelined, as
// redlimit's rueidis cases), at redisPerMinute.
func textbookSlidingLog(b *testing.B, addr string) remoteLimiter {
	c := rueidisClient(b, addr)
	script := rueidis.NewLuaScript(textbookLog)
	window, limit := strconv.Itoa(int(time.Minute/time.Microsecond)), strconv.Itoa(redisPerMinute)
	return remoteLimiter{
		allow: func(ctx context.Context, key string) (bool, error) {
			now := strconv.FormatInt(time.Now().UnixMicro(), 10)
			n, err := script.Exec(ctx, c, []string{"textbook:" + key}, []string{now, window, limit, "60"}).AsInt64()
			return n == 1, err
		},
		close: c.Close,
	}
}

func redisCases() []redisCase {
	// redis_rate runs first and again last: the two tell how much the
	// machine drifted during the run. "unbatched" is redisstore with
	// WithBatching(false): one script call per decision.
	cases := []redisCase{{name: "redis_rate/first", new: redisRate}}
	base := redlimit.PerMinute(redisPerMinute)
	for _, l := range []redlimit.Limit{
		base.FixedWindow(),
		base.SlidingLog(),
		base.SlidingWindow(),
		base.TokenBucket(redisPerMinute),
	} {
		cases = append(cases,
			redisCase{name: l.Algorithm.String() + "/rueidis", new: redlimitRueidis(l)},
			redisCase{name: l.Algorithm.String() + "/rueidis-unbatched", new: redlimitRueidis(l, redisstore.WithBatching(false))},
			redisCase{name: l.Algorithm.String() + "/go-redis", new: redlimitGoRedis(l)},
		)
	}
	// The textbook sliding log (textbookLog), beside redlimit's exact one.
	cases = append(cases, redisCase{name: "sliding_log_textbook/rueidis", new: textbookSlidingLog})
	cases = append(cases, redisCase{name: "redis_rate/last", new: redisRate})
	// One hot key, with a limit far above the load (a sliding log may not
	// count that high: its limit is MaxLogCount per 100 ms, 1,000,000/s).
	hot := redlimit.PerMinute(hotPerMinute)
	cases = append(cases, redisCase{name: "hot_key/redis_rate", new: redisRateAt(redis_rate.PerMinute(hotPerMinute)), keys: 1})
	for _, l := range []redlimit.Limit{hot.FixedWindow(), hot.SlidingWindow(), hot.TokenBucket(hotPerMinute), redlimit.Per(redlimit.MaxLogCount, 100*time.Millisecond).SlidingLog()} {
		cases = append(cases,
			redisCase{name: "hot_key/" + l.Algorithm.String() + "/rueidis", new: redlimitRueidis(l), keys: 1},
			redisCase{name: "hot_key/" + l.Algorithm.String() + "/rueidis-unbatched", new: redlimitRueidis(l, redisstore.WithBatching(false)), keys: 1},
		)
	}
	return cases
}

// hotPerMinute is the hot key's limit: far above what 64 callers on one
// key reach.
const hotPerMinute = 1_000_000_000

// BenchmarkRedis measures decisions per second and the latency of one
// decision with 64 concurrent callers over 10,000 keys, against one local
// redis-server shared by every case. Run it with -cpu 2 (any -cpu works:
// the parallelism is set so there are always 64 callers).
func BenchmarkRedis(b *testing.B) {
	addr := redisServer(b).Addr()
	for _, c := range redisCases() {
		keys := makeKeys(redisKeys)
		if c.keys > 0 {
			keys = makeKeys(c.keys)
		}
		b.Run(c.name, func(b *testing.B) { benchRedis(b, c, addr, keys) })
	}
}

func benchRedis(b *testing.B, c redisCase, addr string, keys []string) {
	srv := redisServer(b)
	flush(b, srv)
	l := c.new(b, addr)
	defer l.close()
	ctx := context.Background()
	// Load the script and open the connections before timing.
	for _, k := range keys[:min(len(keys), redisCallers)] {
		if _, err := l.allow(ctx, k); err != nil {
			b.Fatal(err)
		}
	}

	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((redisCallers + procs - 1) / procs)
	var (
		mu       sync.Mutex
		all      = make([]time.Duration, 0, b.N)
		denied   atomic.Int64
		firstErr atomic.Value
	)
	perCaller := b.N/redisCallers + 64
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		b.Fatal(err)
	}
	cpu0, cli0 := serverCPU(b, srv), processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		lat := make([]time.Duration, 0, perCaller)
		cur := newCursor(len(keys))
		var d int64
		for pb.Next() {
			t0 := time.Now()
			ok, err := l.allow(ctx, keys[cur.next()])
			lat = append(lat, time.Since(t0))
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			} else if !ok {
				d++
			}
		}
		denied.Add(d)
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cli := processCPU() - cli0
	cpu := serverCPU(b, srv) - cpu0
	scriptUsec := scriptTime(b, srv)
	if err := firstErr.Load(); err != nil {
		b.Fatalf("allow: %v", err)
	}
	if d := denied.Load(); d*100 > int64(b.N) {
		b.Errorf("%d of %d requests denied: not the allow path", d, b.N)
	}
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(micros(percentile(all, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(all, 0.99)), "p99-µs")
	// CPU per decision, which decides the throughput when the cores are
	// shared (two here, for the benchmark, redis-server and anything else
	// running): the benchmark process's (the client library and the
	// store), and redis-server's, of which the time it counted inside
	// script calls (EVALSHA and EVAL). srv-cores is the server's CPU time
	// over the run: near 1.0, the single-threaded server is the limit.
	b.ReportMetric(micros(cli)/float64(b.N), "cli-cpu-µs/op")
	b.ReportMetric(micros(cpu)/float64(b.N), "srv-cpu-µs/op")
	b.ReportMetric(scriptUsec/float64(b.N), "srv-script-µs/op")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "srv-cores")
}

// serverCPU returns the CPU time (user + system) the server has used.
func serverCPU(b *testing.B, srv *redistest.Server) time.Duration {
	info := serverInfo(b, srv, "cpu")
	secs := info["used_cpu_user"] + info["used_cpu_sys"]
	return time.Duration(secs * float64(time.Second))
}

// scriptTime returns the microseconds the server spent running scripts
// since the statistics were last reset.
func scriptTime(b *testing.B, srv *redistest.Server) float64 {
	info := serverInfo(b, srv, "commandstats")
	return info["cmdstat_evalsha.usec"] + info["cmdstat_eval.usec"]
}

// serverInfo returns the numeric fields of INFO section. A commandstats
// line "cmdstat_get:calls=3,usec=5,..." becomes "cmdstat_get.calls" etc.
func serverInfo(b *testing.B, srv *redistest.Server, section string) map[string]float64 {
	out, err := srv.Do("INFO", section)
	if err != nil {
		b.Fatalf("INFO %s: %v", section, err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if !strings.Contains(val, "=") {
			if f, err := strconv.ParseFloat(val, 64); err == nil {
				m[name] = f
			}
			continue
		}
		for _, kv := range strings.Split(val, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				m[name+"."+k] = f
			}
		}
	}
	return m
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
