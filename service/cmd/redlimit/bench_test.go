package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/loadgen"
)

// benchRules are three limits far above what the benchmark sends, so that
// every decision is an allowed one that writes to Redis.
const benchRules = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 100000000
  - key: route
    rate_limit:
      unit: minute
      requests_per_unit: 100000000
      algorithm: fixed_window
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 10000000
      algorithm: token_bucket
  - key: log
    rate_limit:
      unit: minute
      requests_per_unit: 100000
      algorithm: sliding_log
`

// BenchmarkRLS measures `redlimit serve` as a separate process, on one
// local redis-server, over gRPC on loopback: 64 concurrent clients, each
// with its own connection or sharing 8 (Envoy multiplexes its requests over
// a connection per worker thread), in loadgen.Run's closed loop, asking
// about 10,000 keys drawn uniformly, with one descriptor (a sliding window, the default algorithm) and with
// three per request (a sliding window, a fixed window and a token bucket);
// and, at 64 connections, one descriptor of each other algorithm.
//
// Beside the service, the same decisions are asked of the library alone,
// in the benchmark's process, by 64 goroutines, on a redis-server of its
// own: redisstore on rueidis as the service opens it ("library-redisstore")
// and behind a resilient.Limiter as the service calls it
// ("library-resilient"); REDLIMIT_BENCH_LIBRARY=0 leaves them out.
//
// Each case reports decisions per second, latency percentiles, the CPU
// time per decision of the service (svc-cpu), of its redis-server and of
// the benchmark's process (client-cpu: the load generator, or for the
// library targets the library and its callers), how busy the host was and
// how much of it other processes took (others-busy: figures are only
// comparable when it stays small), the share of decisions not made by
// Redis (not-from-store: a failure policy answered after a timeout, or the
// deny cache; the figures are Redis's only while it stays 0); and for the
// service its allocations,
// garbage collections, read and write system calls per decision and the
// decisions per read of its redis-server (how many rueidis pipelines into
// one write).
//
//	go test -run '^$' -bench BenchmarkRLS -benchtime 5s ./service/cmd/redlimit
//
// With REDLIMIT_BENCH_ENVOY_RATELIMIT naming an envoyproxy/ratelimit
// binary (go build ./src/service_cmd in its repository), the same workload
// runs against it too, on a redis-server of its own, in the same run (its
// rules: the same limits, its only algorithm, fixed windows). With
// REDLIMIT_BENCH_BASELINE naming other redlimit binaries (older builds, to
// measure a change; a list separated by os.PathListSeparator, each named
// by its file name), each runs the same cases too, on a redis-server of its
// own, each case right after this build's. With REDLIMIT_BENCH_PROFILES
// naming a directory, the service's CPU profile of
// REDLIMIT_BENCH_PROFILE_SECONDS (default 3) s of each case is written
// there, and its allocation profiles before and after the case.
//
// Every case also runs against a gRPC floor ("grpc-floor"): this test
// binary serving ShouldRateLimit with the service's gRPC server settings
// and a constant OK answer, what grpc-go costs before any decision
// (REDLIMIT_BENCH_GRPC_FLOOR=0 leaves it out). With REDLIMIT_BENCH_H2LOAD
// naming nghttp2's h2load, every service target runs each case a second
// time driven by h2load instead of grpc-go's client (cases ending in
// "/h2load"; one key, as h2load sends one body).
//
// Run it without -race: the binary is built with the race detector when
// the tests have it.
func BenchmarkRLS(b *testing.B) {
	if raceEnabled {
		b.Skip("the service binary is built with -race; benchmark without it")
	}
	targets := benchTargets(b)
	type workload struct {
		name string
		keys []string // the descriptors' keys, one entry each
	}
	var cases []workload
	for _, n := range []int{1, 3} {
		for _, conns := range []int{64, 8} {
			cases = append(cases, workload{fmt.Sprintf("descriptors=%d/conns=%d", n, conns), []string{"user", "route", "tenant"}[:n]})
		}
	}
	cases = append(cases,
		workload{"fixed_window/conns=64", []string{"route"}},
		workload{"token_bucket/conns=64", []string{"tenant"}},
		workload{"sliding_log/conns=64", []string{"log"}})
	for _, c := range cases {
		conns := 64
		if strings.HasSuffix(c.name, "conns=8") {
			conns = 8
		}
		for _, tg := range targets {
			b.Run(tg.name+"/"+c.name, func(b *testing.B) {
				runLoad(b, tg, c.keys, 64, conns, "")
			})
		}
		if h2load := os.Getenv("REDLIMIT_BENCH_H2LOAD"); h2load != "" {
			for _, tg := range targets {
				if tg.lib == nil {
					b.Run(tg.name+"/"+c.name+"/h2load", func(b *testing.B) {
						runLoad(b, tg, c.keys, 64, conns, h2load)
					})
				}
			}
		}
	}
}

// benchTargets starts the services BenchmarkRLS compares: this build of
// redlimit, and those the environment names (see BenchmarkRLS).
func benchTargets(b *testing.B) []target {
	start := func(name, bin string, env ...string) target {
		redis := redistest.Start(b)
		cfg := filepath.Join(b.TempDir(), "bench.yaml")
		writeFile(b, cfg, benchRules)
		args := []string{"--config=" + cfg, "--redis=redis://" + redis.Addr(), "--pprof"}
		if len(env) > 0 {
			args = append(args, "--tracing")
		}
		p := startProcBin(b, bin, append(benchEnv(), env...), args...)
		return target{name: name, grpcAddr: p.grpcAddr, pid: p.cmd.Process.Pid, httpAddr: p.httpAddr, redis: redis}
	}
	targets := []target{start("redlimit", binPath)}
	if os.Getenv("REDLIMIT_BENCH_TRACING") == "1" {
		// Every decision traced (the requests carry no trace context: each
		// a root span, sampled or not), its spans exported to a collector
		// that counts and drops them.
		sink := newCollector(b, false)
		otlp := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.url, "OTEL_BSP_MAX_QUEUE_SIZE=65536"}
		targets = append(targets,
			start("redlimit-tracing-sampled", binPath, append(otlp, "OTEL_TRACES_SAMPLER=always_on")...),
			start("redlimit-tracing-unsampled", binPath, append(otlp, "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0")...))
	}
	if os.Getenv("REDLIMIT_BENCH_LIBRARY") != "0" {
		targets = append(targets, libraryTargets(b)...)
	}
	if list := os.Getenv("REDLIMIT_BENCH_BASELINE"); list != "" {
		for _, bin := range filepath.SplitList(list) {
			targets = append(targets, start(filepath.Base(bin), bin))
		}
	}
	if bin := os.Getenv("REDLIMIT_BENCH_ENVOY_RATELIMIT"); bin != "" {
		targets = append(targets, startEnvoyRatelimit(b, bin))
	}
	if os.Getenv("REDLIMIT_BENCH_GRPC_FLOOR") != "0" {
		targets = append(targets, startFloor(b))
	}
	return targets
}

// target is a rate limit service under benchmark.
type target struct {
	name     string
	grpcAddr string
	pid      int
	httpAddr string // with /debug/pprof/, or ""
	redis    *redistest.Server
	// lib, when not nil, is the library called in the benchmark's
	// process instead of a service: the same decisions without gRPC.
	lib redlimit.Limiter
}

// libraryTargets return redisstore on rueidis, as `redlimit serve` opens
// it, on a redis-server of its own: called directly, and behind a
// resilient.Limiter (deadline, breaker, deny cache) as the service calls
// it.
func libraryTargets(b *testing.B) []target {
	redis := redistest.Start(b)
	store, err := redisstore.Open(context.Background(), "redis://"+redis.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	rl, err := resilient.New(store, resilient.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rl.Close() })
	return []target{
		{name: "library-redisstore", redis: redis, lib: store},
		{name: "library-resilient", redis: redis, lib: rl},
	}
}

// startEnvoyRatelimit runs the envoyproxy/ratelimit binary bin on a
// redis-server of its own, with benchRules' limits as fixed windows.
func startEnvoyRatelimit(b *testing.B, bin string) target {
	redis := redistest.Start(b)
	root := b.TempDir()
	dir := filepath.Join(root, "rl", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var rules []string
	for _, line := range strings.Split(benchRules, "\n") {
		if !strings.Contains(line, "algorithm:") {
			rules = append(rules, line)
		}
	}
	writeFile(b, filepath.Join(dir, "bench.yaml"), strings.Join(rules, "\n"))
	ports := freePorts(b, 3)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"HOST=127.0.0.1", "PORT="+ports[0], "GRPC_HOST=127.0.0.1", "GRPC_PORT="+ports[1],
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+ports[2], "USE_STATSD=false", "LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redis.Addr(),
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false")
	tg := startChild(b, "envoyproxy-ratelimit", cmd, "127.0.0.1:"+ports[1])
	tg.redis = redis
	return tg
}

// freePorts returns n free loopback ports.
func freePorts(b *testing.B, n int) []string {
	var ports []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// runLoad runs clients concurrent callers over nconns connections, each
// request with one descriptor per key of keys: from goroutines of this
// process on grpc-go (or calling the library), or, with h2load naming
// nghttp2's h2load, from it.
func runLoad(b *testing.B, tg target, keys []string, clients, nconns int, h2load string) {
	const nkeys = 10_000
	var target loadgen.Target
	var notFromStore atomic.Int64 // library decisions a failure policy or the deny cache answered
	switch {
	case h2load != "":
	case tg.lib != nil:
		target = libraryTarget(b, tg.lib, keys, nkeys, &notFromStore)
	default:
		target = dialGRPC(b, tg.grpcAddr, keys, nkeys, nconns)
	}
	cpu0, rcpu0, ccpu0 := procCPU(tg.pid), redisCPU(tg.redis), procCPU(os.Getpid())
	sysr0, sysw0 := procSyscalls(tg.pid)
	reads0 := redisInfo(tg.redis, "stats", "total_reads_processed")
	page0 := scrape(tg.httpAddr)
	mallocs0, gcs0 := seriesValue(page0, "go_memstats_mallocs_total"), seriesValue(page0, "go_gc_duration_seconds_count")
	bySource0, fromStore0 := metricSum(page0, sourceSeries), seriesValue(page0, sourceSeries+`{source="store"}`)
	busy0, total0 := hostCPU()
	var prof sync.WaitGroup
	dir := os.Getenv("REDLIMIT_BENCH_PROFILES")
	profile := dir != "" && tg.httpAddr != "" && b.N > 20_000
	if profile {
		// The allocations of the whole case: the service's allocs profile
		// before and after (go tool pprof -base before after).
		saveProfile(b, tg.httpAddr, "allocs", filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".allocs0.pprof"))
	}
	if profile {
		// The service's CPU profile over 3 s of the run, into dir.
		name := filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".pprof")
		prof.Go(func() {
			resp, err := http.Get("http://" + tg.httpAddr + "/debug/pprof/profile?seconds=" + profileSeconds())
			if err != nil {
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(name, data, 0o644); err != nil {
				b.Error(err)
			}
		})
	}
	b.ResetTimer()
	var n int
	var elapsed, p50, p99 time.Duration
	if h2load != "" {
		var all []time.Duration
		n, elapsed, all = h2loadRun(b, h2load, tg.grpcAddr, keys, clients, nconns)
		slices.Sort(all)
		p50, p99 = all[int(0.50*float64(len(all)-1))], all[int(0.99*float64(len(all)-1))]
	} else {
		// The closed loop of redlimit bench: clients workers, b.N
		// decisions, keys drawn uniformly.
		res, err := loadgen.Run(context.Background(), target, loadgen.Options{
			Concurrency: clients, Decisions: int64(b.N), Keys: nkeys, KeyPrefix: keyPrefix, Seed: 1})
		switch {
		case err != nil:
			b.Fatal(err)
		case res.Errors > 0:
			b.Fatalf("%d of %d decisions failed; the first: %s", res.Errors, res.Decisions, res.FirstError)
		case res.Denied > 0:
			b.Fatalf("%d requests denied", res.Denied)
		}
		n, elapsed, p50, p99 = int(res.Decisions), res.Elapsed, res.Latency.P50, res.Latency.P99
	}
	b.StopTimer()
	prof.Wait()
	if profile {
		saveProfile(b, tg.httpAddr, "allocs", filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".allocs1.pprof"))
	}
	cpu1, rcpu1, ccpu1 := procCPU(tg.pid), redisCPU(tg.redis), procCPU(os.Getpid())
	sysr1, sysw1 := procSyscalls(tg.pid)
	reads1 := redisInfo(tg.redis, "stats", "total_reads_processed")
	page1 := scrape(tg.httpAddr)
	mallocs1, gcs1 := seriesValue(page1, "go_memstats_mallocs_total"), seriesValue(page1, "go_gc_duration_seconds_count")
	bySource1, fromStore1 := metricSum(page1, sourceSeries), seriesValue(page1, sourceSeries+`{source="store"}`)
	busy1, total1 := hostCPU()
	if ok0, ok1 := seriesValue(page0, okSeries), seriesValue(page1, okSeries); ok0 >= 0 && int(ok1-ok0) != n {
		// h2load sees HTTP statuses only; the service counts its answers.
		b.Fatalf("the service answered %v of %d requests OK", ok1-ok0, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	if cpu0 >= 0 && cpu1 >= 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(n), "svc-cpu-µs/op")
	}
	if rcpu0 >= 0 && rcpu1 >= 0 {
		b.ReportMetric(float64(rcpu1-rcpu0)/float64(n), "redis-cpu-µs/op")
	}
	if ccpu0 >= 0 && ccpu1 >= 0 {
		b.ReportMetric(float64(ccpu1-ccpu0)/float64(n), "client-cpu-µs/op")
	}
	if sysr0 >= 0 && sysr1 >= 0 {
		// The service's read and write system calls (all sockets).
		b.ReportMetric(float64(sysr1-sysr0)/float64(n), "svc-reads/op")
		b.ReportMetric(float64(sysw1-sysw0)/float64(n), "svc-writes/op")
	}
	if reads1 > reads0 && reads0 >= 0 {
		// Decisions per read of redis-server: how many requests the
		// service's client pipelines into one write.
		b.ReportMetric(float64(n)/float64(reads1-reads0), "decisions/redis-read")
	}
	// Decisions Redis did not make (a failure policy after a timeout, the
	// deny cache): cheaper, so the figures are the store's only while this
	// stays 0.
	switch {
	case tg.lib != nil:
		b.ReportMetric(100*float64(notFromStore.Load())/float64(n), "not-from-store-%")
	case bySource1 > bySource0 && bySource0 >= 0 && fromStore0 >= 0:
		b.ReportMetric(100*(1-(fromStore1-fromStore0)/(bySource1-bySource0)), "not-from-store-%")
	}
	if mallocs0 >= 0 && mallocs1 >= 0 {
		b.ReportMetric((mallocs1-mallocs0)/float64(n), "svc-allocs/op")
	}
	if gcs0 >= 0 && gcs1 >= 0 {
		b.ReportMetric((gcs1-gcs0)/elapsed.Seconds(), "svc-gcs/s")
	}
	if total1 > total0 {
		b.ReportMetric(100*float64(busy1-busy0)/float64(total1-total0), "host-busy-%")
		if tg.lib != nil {
			cpu0, cpu1 = 0, 0 // no service process
		}
		if cpu0 >= 0 && cpu1 >= 0 && rcpu0 >= 0 && rcpu1 >= 0 && ccpu0 >= 0 && ccpu1 >= 0 {
			// What other processes took of the host: the benchmark's
			// figures are only comparable when this stays small.
			ours := float64(cpu1 - cpu0 + rcpu1 - rcpu0 + ccpu1 - ccpu0)
			busy := float64(busy1-busy0) * 1e6 / 100 // jiffies to µs
			b.ReportMetric(max(0, 100*(busy-ours)/(float64(total1-total0)*1e6/100)), "others-busy-%")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// procCPU returns the user+system CPU time of process pid and of the
// children it has waited for, in µs (from /proc; -1 where there is none).
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 15 {
		return -1
	}
	// utime, stime, and cutime, cstime: the children it has waited for
	// (h2load, for the benchmark's process).
	var sum int64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum * 1e6 / 100 // USER_HZ is 100 on Linux
}

// scrape returns the /metrics page of the service at httpAddr, or "" if
// there is none (a library target) or it cannot be read.
func scrape(httpAddr string) string {
	if httpAddr == "" {
		return ""
	}
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// procSyscalls returns the read and write system calls process pid has
// made (syscr and syscw of /proc/<pid>/io; -1 where there is none).
func procSyscalls(pid int) (reads, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1, -1
	}
	reads, writes = -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			reads, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return reads, writes
}

// redisCPU returns redis-server's used_cpu_user + used_cpu_sys in µs, or -1.
func redisCPU(s *redistest.Server) int64 {
	if s == nil {
		return 0 // a target without Redis
	}
	user, sys := redisInfo(s, "cpu", "used_cpu_user"), redisInfo(s, "cpu", "used_cpu_sys")
	if user < 0 || sys < 0 {
		return -1
	}
	return int64((user + sys) * 1e6)
}

// okSeries counts the service's requests answered OK.
const okSeries = `redlimit_rls_requests_total{answer="ok"}`

// sourceSeries counts the service's limited descriptors by the path that
// decided them.
const sourceSeries = "redlimit_rls_decisions_by_source_total"

// redisInfo returns a numeric field of a section of redis-server's INFO,
// or -1.
func redisInfo(s *redistest.Server, section, field string) float64 {
	if s == nil {
		return -1
	}
	info, err := s.Do("INFO", section)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// hostCPU returns the busy and total jiffies of all CPUs (from /proc/stat;
// zeros where there is none).
func hostCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// saveProfile writes the profile named name of the service at httpAddr to
// path.
func saveProfile(b *testing.B, httpAddr, name, path string) {
	resp, err := http.Get("http://" + httpAddr + "/debug/pprof/" + name)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Error(err)
	}
}

// keyPrefix starts the keys loadgen draws, keyPrefix+"0" to
// keyPrefix+"9999": a target finds the request of key i by its number.
const keyPrefix = "k"

// keyIndex returns the number of a key loadgen drew.
func keyIndex(key string, nkeys int) (int, error) {
	i, err := strconv.Atoi(strings.TrimPrefix(key, keyPrefix))
	if err != nil || i < 0 || i >= nkeys {
		return 0, fmt.Errorf("key %q is not one of %d", key, nkeys)
	}
	return i, nil
}

// grpcTarget is the service at the other end of conns: a request for key i
// carries reqs[i]; worker w asks on connection w%len(conns).
type grpcTarget struct {
	conns []pb.RateLimitServiceClient
	reqs  []*pb.RateLimitRequest
	conn  pb.RateLimitServiceClient // a worker's, from ForWorker
}

func (t *grpcTarget) ForWorker(w int) loadgen.Target {
	return &grpcTarget{reqs: t.reqs, conn: t.conns[w%len(t.conns)]}
}

func (t *grpcTarget) Decide(ctx context.Context, key string, _ int64) (bool, error) {
	i, err := keyIndex(key, len(t.reqs))
	if err != nil {
		return false, err
	}
	conn := t.conn
	if conn == nil {
		conn = t.conns[0]
	}
	resp, err := conn.ShouldRateLimit(ctx, t.reqs[i])
	if err != nil {
		return false, err
	}
	return resp.OverallCode == pb.RateLimitResponse_OK, nil
}

// dialGRPC connects nconns gRPC connections to the service at addr, and
// returns a target that asks it about key i with one descriptor per key
// of keys, worker w on connection w%nconns.
func dialGRPC(b *testing.B, addr string, keys []string, nkeys, nconns int) loadgen.WorkerTarget {
	t := &grpcTarget{conns: make([]pb.RateLimitServiceClient, nconns), reqs: make([]*pb.RateLimitRequest, nkeys)}
	for i := range t.reqs {
		r := &pb.RateLimitRequest{Domain: "bench"}
		for _, k := range keys {
			r.Descriptors = append(r.Descriptors, &rlpb.RateLimitDescriptor{
				Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: strconv.Itoa(i)}}})
		}
		t.reqs[i] = r
	}
	for i := range t.conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		t.conns[i] = pb.NewRateLimitServiceClient(c)
		if _, err := t.conns[i].ShouldRateLimit(context.Background(), t.reqs[i]); err != nil { // connect
			b.Fatal(err)
		}
	}
	return t
}

// libraryTarget returns a target that asks lib about key i, with the
// limits benchRules give each key of keys, under the keys the service
// would use: AllowN for one limit, AllowAll for several, as the service
// does.
func libraryTarget(b *testing.B, lib redlimit.Limiter, keys []string, nkeys int, notFromStore *atomic.Int64) loadgen.Target {
	dom, err := config.Parse("bench.yaml", []byte(benchRules))
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([][]redlimit.Request, nkeys)
	for i := range reqs {
		v := strconv.Itoa(i)
		for _, k := range keys {
			rule := dom.Match([]config.Entry{{Key: k, Value: v}})
			if rule == nil {
				b.Fatalf("no rule for %s", k)
			}
			key := fmt.Sprintf("%d:bench;%d:%s=%d:%s", len("bench"), len(k), k, len(v), v)
			reqs[i] = append(reqs[i], redlimit.Request{Key: key, Limit: rule.Limit, Cost: 1})
		}
	}
	return loadgen.TargetFunc(func(ctx context.Context, key string, _ int64) (bool, error) {
		i, err := keyIndex(key, nkeys)
		if err != nil {
			return false, err
		}
		var d redlimit.Decision
		if r := reqs[i]; len(r) == 1 {
			var res redlimit.Result
			res, err = lib.AllowN(ctx, r[0].Key, r[0].Limit, r[0].Cost)
			d = redlimit.Decision{Allowed: res.Allowed, Results: []redlimit.Result{res}}
		} else {
			d, err = lib.AllowAll(ctx, reqs[i])
		}
		for _, res := range d.Results {
			if res.Source != redlimit.FromStore {
				notFromStore.Add(1)
				break
			}
		}
		return d.Allowed, err
	})
}

// profileSeconds returns REDLIMIT_BENCH_PROFILE_SECONDS, or 3.
func profileSeconds() string {
	if v := os.Getenv("REDLIMIT_BENCH_PROFILE_SECONDS"); v != "" {
		return v
	}
	return "3"
}

// benchEnv passes REDLIMIT_BENCH_GOGC to the service as GOGC.
func benchEnv() []string {
	if v := os.Getenv("REDLIMIT_BENCH_GOGC"); v != "" {
		return []string{"GOGC=" + v}
	}
	return nil
}
