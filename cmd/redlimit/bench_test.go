package main

import (
	"context"
	"fmt"
	"io"
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
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/redlimit/redlimit/internal/redistest"
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
`

// BenchmarkRLS measures `redlimit serve` as a separate process, on one
// local redis-server, over gRPC on loopback: 64 concurrent clients, each
// with its own connection or sharing 8 (Envoy multiplexes its requests over
// a connection per worker thread), asking about 10,000 keys round-robin,
// with one and with three descriptors per request. It reports requests
// (decisions) per second, latency percentiles, the CPU time per request of
// the service, of redis-server and of the benchmark's clients, and how busy
// the host was.
//
//	go test -run '^$' -bench BenchmarkRLS -benchtime 5s ./cmd/redlimit
//
// With REDLIMIT_BENCH_ENVOY_RATELIMIT naming an envoyproxy/ratelimit
// binary (go build ./src/service_cmd in its repository), the same workload
// runs against it too, on a redis-server of its own, in the same run (its
// rules: the same limits, its only algorithm, fixed windows). With
// REDLIMIT_BENCH_PROFILES naming a directory, the service's CPU profile of 3
// s of each case is written there.
//
// Run it without -race: the binary is built with the race detector when
// the tests have it.
func BenchmarkRLS(b *testing.B) {
	if raceEnabled {
		b.Skip("the service binary is built with -race; benchmark without it")
	}
	redis := redistest.Start(b)
	cfg := filepath.Join(b.TempDir(), "bench.yaml")
	writeFile(b, cfg, benchRules)
	p := startProc(b, benchEnv(), "--config="+cfg, "--redis=redis://"+redis.Addr(), "--pprof")
	targets := []target{{"redlimit", p.grpcAddr, p.cmd.Process.Pid, p.httpAddr, redis}}
	if bin := os.Getenv("REDLIMIT_BENCH_ENVOY_RATELIMIT"); bin != "" {
		targets = append(targets, startEnvoyRatelimit(b, bin))
	}
	for _, n := range []int{1, 3} {
		for _, conns := range []int{64, 8} {
			for _, tg := range targets {
				b.Run(fmt.Sprintf("%s/descriptors=%d/conns=%d", tg.name, n, conns), func(b *testing.B) {
					runLoad(b, tg, n, 64, conns)
				})
			}
		}
	}
}

// target is a rate limit service under benchmark.
type target struct {
	name     string
	grpcAddr string
	pid      int
	httpAddr string // with /debug/pprof/, or ""
	redis    *redistest.Server
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
	cmd.SysProcAttr = sysProcAttr()
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := "127.0.0.1:" + ports[1]
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	client := pb.NewRateLimitServiceClient(c)
	req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "0")}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		if err == nil && resp.Statuses[0].CurrentLimit != nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("envoyproxy/ratelimit does not answer (%v):\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return target{"envoyproxy-ratelimit", addr, cmd.Process.Pid, "", redis}
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

// runLoad runs clients concurrent callers over nconns connections.
func runLoad(b *testing.B, tg target, descriptors, clients, nconns int) {
	keys := []string{"user", "route", "tenant"}[:descriptors]
	const nkeys = 10_000
	reqs := make([]*pb.RateLimitRequest, nkeys)
	for i := range reqs {
		r := &pb.RateLimitRequest{Domain: "bench"}
		for _, k := range keys {
			r.Descriptors = append(r.Descriptors, &rlpb.RateLimitDescriptor{
				Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: k, Value: strconv.Itoa(i)}}})
		}
		reqs[i] = r
	}
	conns := make([]pb.RateLimitServiceClient, nconns)
	for i := range conns {
		c, err := grpc.NewClient(tg.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = pb.NewRateLimitServiceClient(c)
		if _, err := conns[i].ShouldRateLimit(context.Background(), reqs[i]); err != nil { // connect
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, clients)
	var next atomic.Int64
	var denied atomic.Int64
	cpu0, rcpu0, ccpu0 := procCPU(tg.pid), redisCPU(tg.redis), procCPU(os.Getpid())
	busy0, total0 := hostCPU()
	var prof sync.WaitGroup
	if dir := os.Getenv("REDLIMIT_BENCH_PROFILES"); dir != "" && tg.httpAddr != "" && b.N > 20_000 {
		// The service's CPU profile over 3 s of the run, into dir.
		name := filepath.Join(dir, strings.ReplaceAll(b.Name(), "/", "_")+".pprof")
		prof.Go(func() {
			resp, err := http.Get("http://" + tg.httpAddr + "/debug/pprof/profile?seconds=3")
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
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			l := make([]time.Duration, 0, b.N/clients+1)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					break
				}
				t0 := time.Now()
				resp, err := conns[c%nconns].ShouldRateLimit(context.Background(), reqs[(int(i)*7919+c)%nkeys])
				l = append(l, time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
				if resp.OverallCode != pb.RateLimitResponse_OK {
					denied.Add(1)
				}
			}
			lat[c] = l
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	prof.Wait()
	cpu1, rcpu1, ccpu1 := procCPU(tg.pid), redisCPU(tg.redis), procCPU(os.Getpid())
	busy1, total1 := hostCPU()
	if denied.Load() > 0 {
		b.Fatalf("%d requests denied", denied.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	if cpu0 >= 0 && cpu1 >= 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "svc-cpu-µs/op")
	}
	if rcpu0 >= 0 && rcpu1 >= 0 {
		b.ReportMetric(float64(rcpu1-rcpu0)/float64(b.N), "redis-cpu-µs/op")
	}
	if ccpu0 >= 0 && ccpu1 >= 0 {
		b.ReportMetric(float64(ccpu1-ccpu0)/float64(b.N), "client-cpu-µs/op")
	}
	if total1 > total0 {
		b.ReportMetric(100*float64(busy1-busy0)/float64(total1-total0), "host-busy-%")
	}
	b.ReportMetric(0, "ns/op")
}

// procCPU returns the user+system CPU time of process pid in µs (from
// /proc; -1 where there is none).
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 1e6 / 100 // USER_HZ is 100 on Linux
}

// redisCPU returns redis-server's used_cpu_user + used_cpu_sys in µs, or -1.
func redisCPU(s *redistest.Server) int64 {
	info, err := s.Do("INFO", "cpu")
	if err != nil {
		return -1
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return int64(total * 1e6)
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

// benchEnv passes REDLIMIT_BENCH_GOGC to the service as GOGC.
func benchEnv() []string {
	if v := os.Getenv("REDLIMIT_BENCH_GOGC"); v != "" {
		return []string{"GOGC=" + v}
	}
	return nil
}
