package bench

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// One 3-master Redis Cluster (no replicas) is started the first time
// BenchmarkRedisCluster needs it; TestMain stops it.
var (
	clusterOnce sync.Once
	cluster     *redistest.Cluster
	clusterErr  error
)

func redisCluster(b *testing.B) *redistest.Cluster {
	b.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = redistest.NewCluster(redistest.ClusterOptions{ReplicasPerMaster: -1}) })
	if clusterErr != nil {
		b.Fatalf("starting the cluster: %v", clusterErr)
	}
	return cluster
}

type clusterCase struct {
	name string
	opts []redisstore.Option
	keys int // how many identifiers; 0 for redisKeys
	// reqs returns the requests of one decision on id: one (AllowN) or
	// several (AllowAll).
	reqs func(id string) []redlimit.Request
}

func clusterCases() []clusterCase {
	fw := redlimit.PerMinute(redisPerMinute).FixedWindow()
	sl := redlimit.PerMinute(redisPerMinute).SlidingLog()
	hot := redlimit.PerMinute(hotPerMinute).FixedWindow()
	three := []redlimit.Limit{
		redlimit.PerMinute(redisPerMinute).FixedWindow(),
		redlimit.PerMinute(redisPerMinute).SlidingWindow(),
		redlimit.PerMinute(redisPerMinute).TokenBucket(redisPerMinute),
	}
	one := func(l redlimit.Limit) func(string) []redlimit.Request {
		return func(id string) []redlimit.Request { return []redlimit.Request{{Key: id, Limit: l, Cost: 1}} }
	}
	allOf := func(id string) []redlimit.Request {
		reqs := make([]redlimit.Request, len(three))
		for i, l := range three {
			reqs[i] = redlimit.Request{Key: id, Limit: l, Cost: 1}
		}
		return reqs
	}
	modes := []struct {
		name string
		opts []redisstore.Option
	}{
		{"per-node", nil},
		{"per-slot", []redisstore.Option{redisstore.WithNodeBatches(false)}},
		{"unbatched", []redisstore.Option{redisstore.WithBatching(false)}},
	}
	var cases []clusterCase
	for _, m := range modes {
		cases = append(cases, clusterCase{name: "spread/fixed_window/" + m.name, opts: m.opts, reqs: one(fw)})
	}
	for _, m := range modes {
		cases = append(cases, clusterCase{name: "spread/sliding_log/" + m.name, opts: m.opts, reqs: one(sl)})
	}
	for _, m := range modes {
		cases = append(cases, clusterCase{name: "hot_key/fixed_window/" + m.name, opts: m.opts, keys: 1, reqs: one(hot)})
	}
	for _, m := range modes {
		cases = append(cases, clusterCase{name: "spread/allow_all_3/" + m.name, opts: m.opts, reqs: allOf})
	}
	return cases
}

// BenchmarkRedisCluster measures decisions per second, latency and CPU per
// decision with 64 concurrent callers on a 3-master Redis Cluster through
// rueidis: over 10,000 identifiers (every slot) and on one hot identifier,
// with batches of a node, batches of a slot and no batching (fixed window,
// and the sliding log over every slot); and AllowAll
// of three limits. srv-cpu-µs/op sums the three masters. Run it with -cpu 2.
func BenchmarkRedisCluster(b *testing.B) {
	cl := redisCluster(b)
	for _, c := range clusterCases() {
		keys := makeKeys(redisKeys)
		if c.keys > 0 {
			keys = makeKeys(c.keys)
		}
		b.Run(c.name, func(b *testing.B) { benchCluster(b, cl, c, keys) })
	}
}

func benchCluster(b *testing.B, cl *redistest.Cluster, c clusterCase, keys []string) {
	masters := cl.Masters()
	for _, m := range masters {
		flush(b, m)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	s, err := redisstore.New(client, c.opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	decide := func(id string) (bool, error) {
		reqs := c.reqs(id)
		if len(reqs) == 1 {
			r, err := s.AllowN(ctx, id, reqs[0].Limit, 1)
			return r.Allowed, err
		}
		d, err := s.AllowAll(ctx, reqs)
		return d.Allowed, err
	}
	// Load the scripts on every master, open the connections and let the
	// Store learn the Cluster before timing.
	for _, k := range keys[:min(len(keys), 256)] {
		if _, err := decide(k); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, k := range keys[:min(len(keys), redisCallers)] {
		wg.Go(func() { decide(k) })
	}
	wg.Wait()

	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((redisCallers + procs - 1) / procs)
	var (
		mu       sync.Mutex
		all      = make([]time.Duration, 0, b.N)
		denied   atomic.Int64
		firstErr atomic.Value
	)
	perCaller := b.N/redisCallers + 64
	var cpu0 time.Duration
	for _, m := range masters {
		if _, err := m.Do("CONFIG", "RESETSTAT"); err != nil {
			b.Fatal(err)
		}
		cpu0 += serverCPU(b, m)
	}
	cli0 := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		lat := make([]time.Duration, 0, perCaller)
		cur := newCursor(len(keys))
		var d int64
		for pb.Next() {
			t0 := time.Now()
			ok, err := decide(keys[cur.next()])
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
	var cpu time.Duration
	var scriptUsec, calls float64
	for _, m := range masters {
		cpu += serverCPU(b, m)
		scriptUsec += scriptTime(b, m)
		info := serverInfo(b, m, "commandstats")
		calls += info["cmdstat_evalsha.calls"] + info["cmdstat_eval.calls"]
	}
	cpu -= cpu0
	if err := firstErr.Load(); err != nil {
		b.Fatalf("decide: %v", err)
	}
	if d := denied.Load(); d*100 > int64(b.N) {
		b.Errorf("%d of %d decisions denied: not the allow path", d, b.N)
	}
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(micros(percentile(all, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(all, 0.99)), "p99-µs")
	b.ReportMetric(micros(cli)/float64(b.N), "cli-cpu-µs/op")
	b.ReportMetric(micros(cpu)/float64(b.N), "srv-cpu-µs/op")
	b.ReportMetric(scriptUsec/float64(b.N), "srv-script-µs/op")
	b.ReportMetric(float64(b.N)/calls, "decisions/call")
}
