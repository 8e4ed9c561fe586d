package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// BenchmarkRedisMemoryPerKey reports, for one identifier whose limit of 100
// per minute has been filled with 100 requests, the bytes Redis spends on
// what the limiter wrote: MEMORY USAGE ... SAMPLES 0 (the value, the key
// name and Redis's per-key overhead) summed over every key under the
// limiter's prefix. It measures once per call and ignores b.N; run it with
// -benchtime 1x.
func BenchmarkRedisMemoryPerKey(b *testing.B) {
	srv := redisServer(b)
	const id = "user:1234567"
	type memCase struct {
		name, prefix string
		fill         func(ctx context.Context, c *redis.Client) error
	}
	redlimitFill := func(l redlimit.Limit) func(context.Context, *redis.Client) error {
		return func(ctx context.Context, c *redis.Client) error {
			s, err := redisstore.NewGoRedis(c)
			if err != nil {
				return err
			}
			for range l.Max() {
				r, err := s.AllowN(ctx, id, l, 1)
				if err != nil {
					return err
				}
				if !r.Allowed {
					b.Fatalf("%s: denied before the limit was full", l)
				}
			}
			return nil
		}
	}
	cases := []memCase{}
	for _, l := range []redlimit.Limit{
		redlimit.PerMinute(100).FixedWindow(),
		redlimit.PerMinute(100).SlidingLog(),
		redlimit.PerMinute(100).SlidingWindow(),
		redlimit.PerMinute(100).TokenBucket(100),
		// Past 128 entries Redis stores a sorted set as a skip list
		// (zset-max-listpack-entries), which costs far more per entry.
		redlimit.PerMinute(1000).SlidingLog(),
	} {
		name := l.Algorithm.String()
		if l.Count != 100 {
			name += "_" + strconv.FormatInt(l.Count, 10)
		}
		cases = append(cases, memCase{name, redisstore.DefaultPrefix, redlimitFill(l)})
	}
	// A sliding window keeps the previous window's counter while the current
	// one fills: 50 requests in one window, then up to 50 in the next (the
	// store's clock moved one period on; the keys' TTLs still run in real
	// time, so the first counter is alive).
	cases = append(cases, memCase{"sliding_window_2_windows", redisstore.DefaultPrefix, func(ctx context.Context, c *redis.Client) error {
		l := redlimit.PerMinute(100).SlidingWindow()
		at := time.Now()
		s, err := redisstore.NewGoRedis(c, redisstore.WithClock(func() time.Time { return at }))
		if err != nil {
			return err
		}
		for i := range 100 {
			if i == 50 {
				at = at.Add(l.Period)
			}
			r, err := s.AllowN(ctx, id, l, 1)
			if err != nil {
				return err
			}
			if !r.Allowed {
				if i < 50 {
					b.Fatalf("%s: denied before the limit was full", l)
				}
				break
			}
		}
		return nil
	}})
	cases = append(cases, memCase{"redis_rate", "rate:", func(ctx context.Context, c *redis.Client) error {
		l := redis_rate.NewLimiter(c)
		for range 100 {
			r, err := l.Allow(ctx, id, redis_rate.PerMinute(100))
			if err != nil {
				return err
			}
			if r.Allowed == 0 {
				b.Fatal("redis_rate: denied before the limit was full")
			}
		}
		return nil
	}})

	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			flush(b, srv)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer client.Close()
			if err := c.fill(context.Background(), client); err != nil {
				b.Fatal(err)
			}
			keys := scanKeys(b, srv, c.prefix)
			var total int64
			for _, k := range keys {
				out, err := srv.Do("MEMORY", "USAGE", k, "SAMPLES", "0")
				if err != nil {
					b.Fatalf("MEMORY USAGE %s: %v", k, err)
				}
				n, err := strconv.ParseInt(out, 10, 64)
				if err != nil {
					b.Fatalf("MEMORY USAGE %s: %q", k, out)
				}
				total += n
			}
			b.Logf("%s: %d key(s) %v, %d bytes", c.name, len(keys), keys, total)
			b.ReportMetric(0, "ns/op") // b.N is not what is measured
			b.ReportMetric(float64(total), "bytes/key")
			b.ReportMetric(float64(len(keys)), "redis-keys")
		})
	}
}

// scanKeys returns every key that starts with prefix.
func scanKeys(b *testing.B, srv *redistest.Server, prefix string) []string {
	var keys []string
	cursor := "0"
	for {
		out, err := srv.Do("SCAN", cursor, "MATCH", prefix+"*", "COUNT", "1000")
		if err != nil {
			b.Fatalf("SCAN: %v", err)
		}
		lines := strings.Split(out, "\n")
		cursor = lines[0]
		for _, k := range lines[1:] {
			if k != "" {
				keys = append(keys, k)
			}
		}
		if cursor == "0" {
			return keys
		}
	}
}
