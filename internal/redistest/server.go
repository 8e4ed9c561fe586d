// Package redistest starts throwaway redis-server processes (standalone
// servers and Redis Clusters) on free 127.0.0.1 ports for tests, and stops
// them again.
//
// Servers are killed by the kernel if the test binary dies (Pdeathsig on
// Linux). Shared servers are started lazily once per test binary; use
// Main in TestMain so they are stopped when the tests finish.
package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// notFoundMsg is the guidance printed when the redis binaries are missing.
const notFoundMsg = "redis-server not found on PATH: run `make test` (it installs Debian's redis-server package when run as root) or install it yourself, e.g. `sudo apt-get install redis-server`"

const (
	startAttempts = 3
	startTimeout  = 10 * time.Second
	logTailLines  = 20
)

// binaries returns the paths of redis-server and redis-cli, or an error
// carrying notFoundMsg.
func binaries() (server, cli string, err error) {
	server, err = exec.LookPath("redis-server")
	if err != nil {
		return "", "", fmt.Errorf("redistest: %s (looking up redis-server: %v)", notFoundMsg, err)
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		return "", "", fmt.Errorf("redistest: %s (looking up redis-cli: %v)", notFoundMsg, err)
	}
	return server, cli, nil
}

// Server is one redis-server process.
type Server struct {
	port     int
	dir      string
	bin      string
	extra    []string // extra redis-server flags
	password string   // from --requirepass, used by Do
	cluster  bool
	sentinel string // the sentinel configuration, for a sentinel

	opMu sync.Mutex // serializes Kill, Restart, Pause, Resume, Stop

	mu      sync.Mutex // guards the fields below
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	waitErr error
	paused  bool
	stopped bool
}

// Addr returns the server address, "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary working directory, which holds
// redis.log (and nodes.conf for cluster nodes).
func (s *Server) Dir() string { return s.dir }

// Do runs one command on a new raw RESP connection (dial timeout 1s,
// overall deadline 5s).
// It returns the reply rendered as text:
//   - simple and bulk strings as they are;
//   - integers in decimal;
//   - nil as "";
//   - arrays flattened, one element per line, joined by "\n".
//
// A Redis error reply is returned as a ReplyError holding the message. If
// the server was started with --requirepass, Do authenticates first.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.Addr(), s.password, doDialTimeout, doDeadline, args...)
}

// quickDo is Do with short timeouts, for polling.
func (s *Server) quickDo(args ...string) (string, error) {
	return do(s.Addr(), s.password, 500*time.Millisecond, time.Second, args...)
}

// Running reports whether the process is running (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *Server) runningLocked() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// live reports whether the process is running and not paused.
func (s *Server) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked() && !s.paused
}

// Kill sends SIGKILL to the server and waits for it to exit. Killing a
// server that is not running is a no-op.
func (s *Server) Kill() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return s.kill()
}

func (s *Server) kill() error {
	s.mu.Lock()
	cmd, done, running := s.cmd, s.done, s.runningLocked()
	s.mu.Unlock()
	if !running {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: kill redis-server %s (pid %d): %w", s.Addr(), cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redistest: redis-server %s (pid %d) did not exit 10s after SIGKILL", s.Addr(), cmd.Process.Pid)
	}
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	return nil
}

// Restart starts the server again on the same port and directory (for a
// cluster node, its nodes.conf makes it rejoin the cluster) and waits until
// it answers PING. A server that is still running is killed first. Start
// failures, for example a port that is briefly still busy, are retried.
func (s *Server) Restart() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return fmt.Errorf("redistest: Restart of stopped server %s", s.Addr())
	}
	if err := s.kill(); err != nil {
		return err
	}
	var err error
	deadline := time.Now().Add(2 * startTimeout)
	for attempt := 1; ; attempt++ {
		if err = s.launch(); err == nil {
			return nil
		}
		if attempt >= 5 || time.Now().After(deadline) {
			return fmt.Errorf("redistest: restart failed after %d attempts: %w", attempt, err)
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// Pause sends SIGSTOP to the server: it keeps its port but stops answering.
func (s *Server) Pause() error {
	return s.signal(sigStop, true)
}

// Resume sends SIGCONT to a paused server.
func (s *Server) Resume() error {
	return s.signal(sigCont, false)
}

func (s *Server) signal(sig os.Signal, paused bool) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("redistest: redis-server %s is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v to redis-server %s: %w", sig, s.Addr(), err)
	}
	s.paused = paused
	return nil
}

// Stop kills the server if it is running, waits for it to exit and removes
// its temporary directory. It is idempotent.
func (s *Server) Stop() {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	stopped := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if stopped {
		return
	}
	_ = s.kill()
	_ = os.RemoveAll(s.dir)
	releasePort(s.port, s.cluster)
}

// args returns the redis-server command line.
func (s *Server) args() []string {
	if s.sentinel != "" {
		conf := filepath.Join(s.dir, "sentinel.conf")
		// Sentinel rewrites its file; a restart starts from the original.
		_ = os.WriteFile(conf, []byte(s.sentinel), 0o600)
		return []string{conf, "--sentinel",
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--dir", s.dir,
			"--daemonize", "no",
			"--protected-mode", "no",
			"--logfile", filepath.Join(s.dir, "redis.log"),
		}
	}
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.cluster {
		a = append(a, "--cluster-config-file", s.nodesConf())
	}
	return append(a, s.extra...)
}

// launch starts the process and waits until it answers PING. On failure
// the process is killed and the error includes the tail of its log.
func (s *Server) launch() error {
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.waitErr, s.paused = cmd, done, nil, false
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()

	pid := strconv.Itoa(cmd.Process.Pid)
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			s.mu.Lock()
			werr := s.waitErr
			s.mu.Unlock()
			return fmt.Errorf("redis-server on %s exited during startup (%v)%s", s.Addr(), werr, s.logTail())
		default:
		}
		if s.answersPing(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = s.kill()
			return fmt.Errorf("redis-server on %s did not answer PING within %v%s", s.Addr(), startTimeout, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answersPing reports whether our process (not some other server that
// grabbed the port) answers PING.
func (s *Server) answersPing(pid string) bool {
	reply, err := do(s.Addr(), "", 200*time.Millisecond, 500*time.Millisecond, "PING")
	var rerr ReplyError
	switch {
	case err == nil && reply == "PONG":
	case errors.As(err, &rerr) && strings.HasPrefix(string(rerr), "NOAUTH"):
	default:
		return false
	}
	info, err := s.quickDo("INFO", "server")
	if err != nil {
		// Cannot check the pid (e.g. ACL setup we do not know); accept.
		return !isNetErr(err)
	}
	return infoField(info, "process_id") == pid
}

func isNetErr(err error) bool {
	var rerr ReplyError
	return !errors.As(err, &rerr)
}

// logTail returns the last lines of the server's log and stdout/stderr,
// formatted for an error message.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, name := range []string{"redis.log", "stdout.log"} {
		path := filepath.Join(s.dir, name)
		data, err := os.ReadFile(path)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", path, strings.Join(lines, "\n"))
	}
	return b.String()
}

// infoField returns the value of "name:value" in an INFO or CLUSTER INFO
// reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), name+":"); ok {
			return v
		}
	}
	return ""
}

// passwordFrom returns the value of --requirepass in args.
func passwordFrom(args []string) string {
	pw := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			pw = args[i+1]
		}
	}
	return pw
}

// Start starts a standalone redis-server; args are passed through as extra
// redis-server flags, e.g. "--requirepass", "x". The server is stopped by
// tb.Cleanup. If it cannot be started, Start calls tb.Fatalf.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := StartServer(args...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartServer is Start without testing: the caller must call Stop.
func StartServer(args ...string) (*Server, error) {
	return startServer(false, args)
}

// startServer creates the temp dir and starts the server, retrying with a
// new port up to startAttempts times.
func startServer(cluster bool, extra []string) (*Server, error) {
	return start(&Server{cluster: cluster, extra: append([]string(nil), extra...), password: passwordFrom(extra)})
}

// start launches s, filled in but for its directory, binary and port.
func start(s *Server) (*Server, error) {
	cluster := s.cluster
	bin, _, err := binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s.dir, s.bin = dir, bin
	var errs []string
	for attempt := 1; attempt <= startAttempts; attempt++ {
		s.port, err = pickPort(cluster)
		if err != nil {
			break
		}
		if err = s.launch(); err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Sprintf("attempt %d: %v", attempt, err))
		releasePort(s.port, cluster)
		// A fresh start on a new port: forget the failed attempt's state.
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		_ = os.Remove(filepath.Join(dir, "dump.rdb"))
	}
	if err != nil && len(errs) < startAttempts {
		errs = append(errs, err.Error())
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("redistest: could not start redis-server (%d attempts):\n%s", startAttempts, strings.Join(errs, "\n"))
}

// Ports handed out by this process, so concurrent starts never pick the
// same one.
var (
	portMu    sync.Mutex
	usedPorts = map[int]bool{}
)

const (
	minPort = 20000
	maxPort = 54000 // port+10000 (cluster bus) stays valid
	busOff  = 10000
)

// ephemeralRange returns the kernel's range of ports for outgoing
// connections, which we prefer to avoid.
var ephemeralRange = sync.OnceValues(func() (int, int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, -1
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, -1
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, -1
	}
	return lo, hi
})

// pickPort returns a free port in [minPort, maxPort]; for cluster nodes
// port+10000 is free too.
func pickPort(cluster bool) (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	lo, hi := ephemeralRange()
	inEphemeral := func(p int) bool { return p >= lo && p <= hi }
	for i := 0; i < 2000; i++ {
		p := minPort + rand.IntN(maxPort-minPort+1)
		// Prefer ports outside the ephemeral range for the first tries.
		if i < 500 && (inEphemeral(p) || cluster && inEphemeral(p+busOff)) {
			continue
		}
		if usedPorts[p] || cluster && usedPorts[p+busOff] {
			continue
		}
		if !portFree(p) || cluster && !portFree(p+busOff) {
			continue
		}
		usedPorts[p] = true
		if cluster {
			usedPorts[p+busOff] = true
		}
		return p, nil
	}
	return 0, errors.New("redistest: no free port found in 20000-54000 on 127.0.0.1")
}

func releasePort(p int, cluster bool) {
	portMu.Lock()
	defer portMu.Unlock()
	delete(usedPorts, p)
	if cluster {
		delete(usedPorts, p+busOff)
	}
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// WaitReplicated waits up to timeout until s has a replica and every
// replica has acknowledged what s had written when called. Use it, not
// WAIT: WAIT counts the writes of its own connection, and Do opens one
// per command, so a WAIT through Do returns at once.
func (s *Server) WaitReplicated(timeout time.Duration) error {
	info, err := s.Do("INFO", "replication")
	if err != nil {
		return fmt.Errorf("redistest: %s: INFO replication: %w", s.Addr(), err)
	}
	target, err := strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64)
	if err != nil {
		return fmt.Errorf("redistest: %s: master_repl_offset: %w", s.Addr(), err)
	}
	return waitUntil(timeout, func() error {
		info, err := s.quickDo("INFO", "replication")
		if err != nil {
			return fmt.Errorf("redistest: %s: INFO replication: %w", s.Addr(), err)
		}
		n, _ := strconv.Atoi(infoField(info, "connected_slaves"))
		if n == 0 {
			return fmt.Errorf("redistest: %s has no replica", s.Addr())
		}
		for i := range n {
			// slaveN:ip=…,port=…,state=online,offset=…,lag=…
			line := infoField(info, fmt.Sprintf("slave%d", i))
			var off int64 = -1
			for _, f := range strings.Split(line, ",") {
				if v, ok := strings.CutPrefix(f, "offset="); ok {
					off, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			if off < target {
				return fmt.Errorf("redistest: %s: replica %q behind offset %d", s.Addr(), line, target)
			}
		}
		return nil
	})
}
