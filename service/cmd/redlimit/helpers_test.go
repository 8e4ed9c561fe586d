package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binPath is the redlimit binary under test, built by TestMain.
var binPath string

// TestMain builds the binary once (with the race detector when the tests
// have it) for every end-to-end test, and removes it at the end. The tests
// here start their own redis-server (redistest.Start) rather than the
// shared one, so that TestMain can remove the build directory, which
// redistest.Main, exiting, would not let it do.
func TestMain(m *testing.M) {
	if addr := os.Getenv(floorEnv); addr != "" {
		os.Exit(serveFloor(addr)) // started by BenchmarkRLS as its gRPC floor
	}
	dir, err := os.MkdirTemp("", "redlimit-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "redlimit")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building redlimit:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one `redlimit serve` process.
type proc struct {
	t        testing.TB
	cmd      *exec.Cmd
	logs     syncBuffer
	grpcAddr string
	httpAddr string
	exited   chan struct{}
	exitErr  error
	conn     *grpc.ClientConn
	client   pb.RateLimitServiceClient
}

// startProc runs `redlimit serve` with args (and free loopback ports, JSON
// logs) and waits until it serves. It is stopped with SIGTERM, and must
// exit 0, at the end of the test, unless the test stopped it.
func startProc(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startProcBin(t, binPath, env, args...)
}

// startProcBin is startProc with the redlimit binary bin.
func startProcBin(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := tryStartProcBin(t, bin, env, args...)
	select {
	case <-p.exited:
		t.Fatalf("redlimit exited at start (%v):\n%s", p.exitErr, p.logs.String())
	default:
	}
	return p
}

// tryStartProc starts the process and waits until it serves or exits.
func tryStartProc(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return tryStartProcBin(t, binPath, env, args...)
}

func tryStartProcBin(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	all := append([]string{"serve", "--grpc-addr=127.0.0.1:0", "--http-addr=127.0.0.1:0", "--log-format=json"}, args...)
	return tryStartCommand(t, bin, env, all...)
}

// tryStartCommand runs bin with exactly args and env (after cleanEnv), and
// waits until it logs "serving" in JSON or exits.
func tryStartCommand(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.SysProcAttr = sysProcAttr()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan [2]string, 1)
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.logs.Write(append(line, '\n'))
			var rec struct{ Msg, GRPC, HTTP string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "serving" {
				serving <- [2]string{rec.GRPC, rec.HTTP}
			}
		}
	}()
	go func() {
		<-logsDone
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	select {
	case addrs := <-serving:
		p.grpcAddr, p.httpAddr = addrs[0], addrs[1]
	case <-p.exited:
		return p
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("redlimit did not start:\n%s", p.logs.String())
	}
	p.conn, err = grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.client = pb.NewRateLimitServiceClient(p.conn)
	t.Cleanup(func() {
		p.conn.Close()
		if err := p.stop(); err != nil {
			t.Errorf("redlimit at the end of the test: %v\n%s", err, p.logs.String())
		}
	})
	return p
}

// cleanEnv returns the environment without REDLIMIT_ variables, and with
// no wait at exit for a race-detector binary (a race found still makes it
// exit 66, which fails the test).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDLIMIT_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return append(env, "GORACE=atexit_sleep_ms=0")
}

// stop sends SIGTERM and waits for the exit; it returns the exit error.
// Stopping a stopped process returns its exit error again.
func (p *proc) stop() error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("no exit 20s after SIGTERM")
	}
}

// wait waits for the process to exit by itself.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("still running after %s", d)
	}
}

func (p *proc) ask(ctx context.Context, domain string, descs ...*rlpb.RateLimitDescriptor) (*pb.RateLimitResponse, error) {
	return p.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: domain, Descriptors: descs})
}

// get returns the status and body of GET path.
func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.httpAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post returns the status, content type and body of POST /json.
func (p *proc) post(body []byte) (int, string, string) {
	resp, err := http.Post("http://"+p.httpAddr+"/json", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// metric returns the value of the series that starts with series, or -1.
func (p *proc) metric(series string) float64 {
	_, body := p.get("/metrics")
	return seriesValue(body, series)
}

// seriesValue returns the value of one series (the metric's name with its
// labels, as the page writes them) on a Prometheus text page, or -1.
func seriesValue(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return -1
}

// metricSum returns the sum of every series of the metric name on a
// Prometheus text page, or -1 if it has none.
func metricSum(page, name string) float64 {
	total, found := 0.0, false
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				total, found = total+v, true
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
