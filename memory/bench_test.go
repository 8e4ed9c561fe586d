package memory_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// BenchmarkAllowN decides requests one after another on 1,000 keys, with a
// clock that moves 10 µs per call, so that every call is allowed at steady
// state. The sliding log cases show what a request's cost does to its
// time and memory.
func BenchmarkAllowN(b *testing.B) {
	cases := []struct {
		name  string
		limit redlimit.Limit
		cost  int64
	}{
		{"fixed_window", redlimit.PerSecond(1e9).FixedWindow(), 1},
		{"sliding_window", redlimit.PerSecond(1e9).SlidingWindow(), 1},
		{"token_bucket", redlimit.PerSecond(1e6).TokenBucket(redlimit.MaxCount), 1},
		{"sliding_log/cost1", redlimit.Per(redlimit.MaxLogCount, 10*time.Millisecond).SlidingLog(), 1},
		{"sliding_log/cost100", redlimit.Per(redlimit.MaxLogCount, 10*time.Millisecond).SlidingLog(), 100},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var tick int64
			base := time.Now().UnixMicro()
			s, err := memory.New(memory.WithClock(func() time.Time { return time.UnixMicro(base + tick*10) }), memory.WithSweepInterval(0))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tick++
				r, err := s.AllowN(ctx, keys[i%len(keys)], c.limit, c.cost)
				if err != nil || !r.Allowed {
					b.Fatalf("%+v, %v", r, err)
				}
			}
		})
	}
	// A new key's first request of the largest cost a sliding log admits:
	// B/op is what it costs in memory (the state, its key and its log).
	b.Run("sliding_log/new_key_cost100000", func(b *testing.B) {
		s, err := memory.New(memory.WithSweepInterval(0), memory.WithMaxKeys(1<<30))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		l := redlimit.PerHour(redlimit.MaxLogCount).SlidingLog()
		b.ReportAllocs()
		for i := range b.N {
			r, err := s.AllowN(ctx, "k"+strconv.Itoa(i), l, redlimit.MaxLogCount)
			if err != nil || !r.Allowed {
				b.Fatalf("%+v, %v", r, err)
			}
		}
	})
}

// BenchmarkWorstCase measures the largest requests the store takes, for
// docs/SECURITY.md: B/op is what one request allocates, held-B/key what
// the store keeps for it after a garbage collection, and cpu-ns/request
// the process's CPU time per request (user and system, garbage collection
// included), beside the wall time of ns/op.
//
//   - new_key_maxcost/<algorithm>: a new key's first request of its
//     largest cost (MaxCost on a MaxCount limit; MaxLogCount on a sliding
//     log);
//   - log100k/fill: one sliding log filled to MaxLogCount entries, one
//     request per microsecond (per op: a request; held-B/key: the log;
//     max-B/request: the request that doubles the buffer);
//   - allowall64_log100k/denied: AllowAll of 64 sliding logs at
//     MaxLogCount entries, each asked for MaxLogCount units, which searches
//     each log for the retry-after; /allowed: the same logs with half
//     their entries expired, each asked for one unit.
//
// Run with -benchtime=100x or less: log100k/fill keeps b.N logs of 2 MiB,
// and the store refuses to grow one past its byte bound (1 GiB).
func BenchmarkWorstCase(b *testing.B) {
	ctx := context.Background()
	newStore := func(b *testing.B, now *int64) *memory.Store {
		base := time.Unix(1_700_000_000, 0).UnixMicro()
		s, err := memory.New(memory.WithClock(func() time.Time { return time.UnixMicro(base + *now) }), memory.WithSweepInterval(0))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	big := redlimit.Per(redlimit.MaxCount, time.Hour)
	for _, c := range []struct {
		name  string
		limit redlimit.Limit
		cost  int64
	}{
		{"fixed_window", big.FixedWindow(), redlimit.MaxCost},
		{"sliding_window", big.SlidingWindow(), redlimit.MaxCost},
		{"token_bucket", big.TokenBucket(redlimit.MaxCount), redlimit.MaxCost},
		{"sliding_log", redlimit.PerHour(redlimit.MaxLogCount).SlidingLog(), redlimit.MaxLogCount},
	} {
		b.Run("new_key_maxcost/"+c.name, func(b *testing.B) {
			var now int64
			s := newStore(b, &now)
			keys := make([]string, b.N)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(100_000_000+i) // 14 bytes
			}
			held, cpu := startMeasure(b)
			for i := range b.N {
				if r, err := s.AllowN(ctx, keys[i], c.limit, c.cost); err != nil || !r.Allowed {
					b.Fatalf("%+v, %v", r, err)
				}
			}
			stopMeasure(b, held, cpu, b.N, b.N)
			runtime.KeepAlive(s)
		})
	}
	const window = time.Hour
	logLimit := redlimit.Per(redlimit.MaxLogCount, window).SlidingLog()
	// fill makes MaxLogCount requests on key, one per µs from now+1,
	// and returns the most one of them allocated.
	fill := func(b *testing.B, s *memory.Store, now *int64, key string, measure bool) uint64 {
		var most uint64
		var m runtime.MemStats
		for i := 1; i <= redlimit.MaxLogCount; i++ {
			*now++
			// The buffer doubles when the request after a power of two
			// entries comes.
			grows := measure && i > 4 && (i-1)&(i-2) == 0
			var before uint64
			if grows {
				runtime.ReadMemStats(&m)
				before = m.TotalAlloc
			}
			if r, err := s.AllowN(ctx, key, logLimit, 1); err != nil || !r.Allowed {
				b.Fatalf("request %d: %+v, %v", i, r, err)
			}
			if grows {
				runtime.ReadMemStats(&m)
				most = max(most, m.TotalAlloc-before)
			}
		}
		return most
	}
	b.Run("log100k/fill", func(b *testing.B) {
		var now int64
		s := newStore(b, &now)
		held, cpu := startMeasure(b)
		var most uint64
		for i := range b.N {
			most = max(most, fill(b, s, &now, "log"+strconv.Itoa(i), true))
		}
		stopMeasure(b, held, cpu, b.N*redlimit.MaxLogCount, b.N)
		b.ReportMetric(float64(most), "max-B/request")
		runtime.KeepAlive(s)
	})
	logs := func(b *testing.B, cost int64) (*memory.Store, *int64, []redlimit.Request) {
		now := new(int64)
		s := newStore(b, now)
		reqs := make([]redlimit.Request, redlimit.MaxRequests)
		for i := range reqs {
			*now = 0
			reqs[i] = redlimit.Request{Key: "log" + strconv.Itoa(i), Limit: logLimit, Cost: cost}
			fill(b, s, now, reqs[i].Key, false)
		}
		return s, now, reqs
	}
	b.Run("allowall64_log100k/denied", func(b *testing.B) {
		s, now, reqs := logs(b, redlimit.MaxLogCount)
		*now = redlimit.MaxLogCount + 1
		held, cpu := startMeasure(b)
		for range b.N {
			if d, err := s.AllowAll(ctx, reqs); err != nil || d.Allowed || d.Results[0].RetryAfter != window-time.Microsecond {
				b.Fatalf("%+v, %v", d.Results[0], err)
			}
		}
		stopMeasure(b, held, cpu, b.N, 0)
	})
	b.Run("allowall64_log100k/allowed", func(b *testing.B) {
		s, now, reqs := logs(b, 1)
		*now = window.Microseconds() + redlimit.MaxLogCount/2
		held, cpu := startMeasure(b)
		for range b.N {
			*now++
			if d, err := s.AllowAll(ctx, reqs); err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d.Results[0], err)
			}
		}
		stopMeasure(b, held, cpu, b.N, 0)
	})
}

// startMeasure collects garbage and starts the timer; it returns the live
// heap and the process's CPU time (0 where it is not known).
func startMeasure(b *testing.B) (heap uint64, cpu time.Duration) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportAllocs()
	b.ResetTimer()
	return m.HeapAlloc, processCPU()
}

// stopMeasure stops the timer and reports, since startMeasure, the CPU
// time per request (of requests made) and the heap the store kept per key
// (of keys made, if any).
func stopMeasure(b *testing.B, heap0 uint64, cpu0 time.Duration, requests, keys int) {
	b.StopTimer()
	if cpu := processCPU(); cpu > 0 {
		b.ReportMetric(float64(cpu-cpu0)/float64(requests), "cpu-ns/request")
	}
	if keys == 0 {
		return
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportMetric((float64(m.HeapAlloc)-float64(heap0))/float64(keys), "held-B/key")
}
