package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// memLimiter is one in-process limiter under test: allow decides one
// request for key and reports whether it was allowed.
type memLimiter struct {
	allow func(key string) (bool, error)
	close func()
}

type memCase struct {
	name string
	new  func(b *testing.B) memLimiter
}

// The limits are far above what two cores can ask for (1e9 per second per
// key), so every call takes the allow path, the one a limiter runs for
// almost every request in production. A denial fails the benchmark.
const memRate = 1_000_000_000

func redlimitMemory(l redlimit.Limit) func(b *testing.B) memLimiter {
	return func(b *testing.B) memLimiter {
		s, err := memory.New()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		return memLimiter{
			allow: func(key string) (bool, error) {
				r, err := s.AllowN(ctx, key, l, 1)
				return r.Allowed, err
			},
			close: func() { s.Close() },
		}
	}
}

var memCases = []memCase{
	{"redlimit_fixed_window", redlimitMemory(redlimit.PerSecond(memRate).FixedWindow())},
	{"redlimit_sliding_window", redlimitMemory(redlimit.PerSecond(memRate).SlidingWindow())},
	// The token bucket keeps time in whole microseconds: its emission
	// interval is Period/Count rounded up, so 1e9/s is really 1e6/s per key,
	// less than one hot key receives here. A burst of 2^40 (the largest a
	// Limit may have; 2^40 µs of tolerance, about 12.7 days) lets a hot key
	// run far faster than the refill for the whole benchmark without being
	// denied, so the allow path is what is measured.
	{"redlimit_token_bucket", redlimitMemory(redlimit.PerSecond(memRate).TokenBucket(redlimit.MaxCount))},
	// The sliding log stores one timestamp per admitted request for one
	// period, and its Count may not exceed redlimit.MaxLogCount (100,000).
	// 100,000 per millisecond, the shortest period, is 1e8 per second: ten
	// times what one hot key receives here (~7M calls/s on a core), so every
	// call is allowed, and the log holds only the last millisecond: a few
	// thousand timestamps for the hot key (a ring of at most 100,000 int64s,
	// 800 KB, by construction), a handful for each of 10,000 keys. Memory
	// stays bounded and the allow path runs at steady state: every call
	// counts the live timestamps, trims the expired ones and appends one.
	{"redlimit_sliding_log", redlimitMemory(redlimit.Per(redlimit.MaxLogCount, time.Millisecond).SlidingLog())},
	// golang.org/x/time/rate has no keys: one *rate.Limiter per key in a
	// sync.Map, created on first use, is how it is commonly keyed.
	{"x_time_rate", func(b *testing.B) memLimiter {
		var m sync.Map
		return memLimiter{
			allow: func(key string) (bool, error) {
				v, ok := m.Load(key)
				if !ok {
					v, _ = m.LoadOrStore(key, rate.NewLimiter(rate.Limit(memRate), memRate))
				}
				return v.(*rate.Limiter).Allow(), nil
			},
			close: func() {},
		}
	}},
	// sethvargo/go-limiter v0.7.1 refills a bucket by Interval/Tokens tokens
	// (in nanoseconds per token) for each whole Interval elapsed, which is the
	// full bucket for ordinary limits but a single token for 1e9 per second:
	// after the first second almost every call would be denied. The same
	// rate as 1e12 tokens per 1000 s never reaches a refill in a benchmark
	// run (each case gets a new store), so every call takes the allow path.
	{"sethvargo_memorystore", func(b *testing.B) memLimiter {
		s, err := memorystore.New(&memorystore.Config{Tokens: memRate * 1000, Interval: 1000 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		return memLimiter{
			allow: func(key string) (bool, error) {
				_, _, _, ok, err := s.Take(ctx, key)
				return ok, err
			},
			close: func() { s.Close(ctx) },
		}
	}},
}

// BenchmarkMemory compares in-process limiters on the allow path, with
// GOMAXPROCS goroutines (use -cpu 1,2) deciding for one hot key or
// round-robin over 10,000 keys.
func BenchmarkMemory(b *testing.B) {
	for _, nkeys := range []int{1, 10_000} {
		keys := makeKeys(nkeys)
		name := "hot_key"
		if nkeys > 1 {
			name = "10k_keys"
		}
		b.Run(name, func(b *testing.B) {
			for _, c := range memCases {
				b.Run(c.name, func(b *testing.B) { benchMemory(b, c, keys) })
			}
		})
	}
}

func benchMemory(b *testing.B, c memCase, keys []string) {
	l := c.new(b)
	defer l.close()
	// Every key has its state before the timer starts: what is measured is
	// a key already seen, not its first request.
	for _, k := range keys {
		if ok, err := l.allow(k); err != nil || !ok {
			b.Fatalf("warm-up: %s: allowed %v, error %v", k, ok, err)
		}
	}
	var denied atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		cur := newCursor(len(keys))
		var d int64
		for pb.Next() {
			if ok, err := l.allow(keys[cur.next()]); err != nil || !ok {
				d++
			}
		}
		denied.Add(d)
	})
	cpu = processCPU() - cpu
	b.StopTimer()
	// CPU time per decision, all threads of the process: at -cpu 2 about
	// twice ns/op when both cores are busy with the benchmark, and much
	// less moved than ns/op by other work on a shared machine.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if d := denied.Load(); d > 0 {
		b.Errorf("%d of %d requests denied or failed: not the allow path", d, b.N)
	}
}
