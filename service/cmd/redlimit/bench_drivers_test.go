package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit/service/internal/server"
)

// floorEnv, set to a loopback address, makes the test binary serve
// floorService there instead of running tests (see TestMain).
const floorEnv = "REDLIMIT_BENCH_GRPC_FLOOR_ADDR"

// floorService answers every ShouldRateLimit at once with OK and a status
// per descriptor like the service's, deciding nothing: what gRPC alone
// costs with the service's server settings, the floor under any rate
// limit service built on grpc-go.
type floorService struct {
	pb.UnimplementedRateLimitServiceServer
}

func (floorService) ShouldRateLimit(_ context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, len(req.Descriptors)),
	}
	for i := range resp.Statuses {
		resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{
			Code:               pb.RateLimitResponse_OK,
			CurrentLimit:       &pb.RateLimitResponse_RateLimit{RequestsPerUnit: 100_000_000, Unit: pb.RateLimitResponse_RateLimit_MINUTE},
			LimitRemaining:     99_999_999,
			DurationUntilReset: durationpb.New(time.Minute),
		}
	}
	return resp, nil
}

// serveFloor serves floorService on addr, with the service's gRPC server
// settings, until SIGTERM or SIGINT; it returns the process's exit code.
func serveFloor(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	g := grpc.NewServer(server.GRPCOptions(server.Options{})...)
	pb.RegisterRateLimitServiceServer(g, floorService{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; g.GracefulStop() }()
	if err := g.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startFloor runs this test binary as a floorService process.
func startFloor(b *testing.B) target {
	addr := "127.0.0.1:" + freePorts(b, 1)[0]
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floorEnv+"="+addr)
	return startChild(b, "grpc-floor", cmd, addr)
}

// startChild starts cmd, a rate limit service serving gRPC on addr, waits
// until it answers, and stops it with SIGTERM at the end of the benchmark.
func startChild(b *testing.B, name string, cmd *exec.Cmd, addr string) target {
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
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	client := pb.NewRateLimitServiceClient(c)
	req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "0")}}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("%s's output:\n%s", name, logs.String())
		}
	})
	waitFor(b, name+" to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, req)
		return err == nil && resp.Statuses[0].CurrentLimit != nil
	})
	return target{name: name, grpcAddr: addr, pid: cmd.Process.Pid}
}

// h2loadPath is the RLS method as an HTTP/2 path.
const h2loadPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// h2loadRequests matches h2load's summary line of requests.
var h2loadRequests = regexp.MustCompile(`requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded`)

// h2loadRun sends at least b.N ShouldRateLimit requests (one descriptor per
// key of keys, all with the value "0": h2load sends one body) to the
// service at addr with nghttp2's h2load at bin, clients at a time over
// nconns connections; it returns the requests made, how long they took in
// all and their latencies. h2load checks the HTTP status only: the caller
// checks the gRPC answers where the service counts them.
func h2loadRun(b *testing.B, bin, addr string, keys []string, clients, nconns int) (n int, elapsed time.Duration, lat []time.Duration) {
	req := &pb.RateLimitRequest{Domain: "bench"}
	for _, k := range keys {
		req.Descriptors = append(req.Descriptors, desc(k, "0"))
	}
	msg, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, 5+len(msg)) // gRPC's length-prefixed message
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	copy(frame[5:], msg)
	dir := b.TempDir()
	body, log := filepath.Join(dir, "body"), filepath.Join(dir, "latencies")
	if err := os.WriteFile(body, frame, 0o644); err != nil {
		b.Fatal(err)
	}
	n = max(b.N, 2*clients)
	cmd := exec.Command(bin, "-n", strconv.Itoa(n), "-c", strconv.Itoa(nconns), "-m", strconv.Itoa(clients/nconns),
		"-t", "1", "-d", body, "--log-file", log,
		"-H", "content-type: application/grpc", "-H", "te: trailers", "http://"+addr+h2loadPath)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed = time.Since(start)
	if err != nil {
		b.Fatalf("h2load: %v\n%s", err, out)
	}
	m := h2loadRequests.FindSubmatch(out)
	if m == nil || string(m[1]) != strconv.Itoa(n) || string(m[2]) != strconv.Itoa(n) {
		b.Fatalf("h2load did not complete %d requests:\n%s", n, out)
	}
	f, err := os.Open(log)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start time (µs since the epoch), HTTP status, latency (µs)
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 || fields[1] != "200" {
			b.Fatalf("h2load: request answered %q", sc.Text())
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			b.Fatalf("h2load log: %q", sc.Text())
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	if len(lat) != n {
		b.Fatalf("h2load logged %d requests of %d", len(lat), n)
	}
	return n, elapsed, lat
}
