package redistest_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// quickPing sends PING on a raw connection with a short deadline.
func quickPing(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func mustDo(t *testing.T, s *redistest.Server, want string, args ...string) {
	t.Helper()
	got, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%s %v: %v", s.Addr(), args, err)
	}
	if got != want {
		t.Fatalf("%s %v = %q, want %q", s.Addr(), args, got, want)
	}
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.Port() <= 0 {
		t.Fatalf("Addr %q Port %d", s.Addr(), s.Port())
	}
	mustDo(t, s, "OK", "SET", "std:k", "hello\nworld")
	mustDo(t, s, "hello\nworld", "GET", "std:k")
	mustDo(t, s, "", "GET", "std:missing")
	mustDo(t, s, "3", "RPUSH", "std:l", "a", "b", "c")
	mustDo(t, s, "a\nb\nc", "LRANGE", "std:l", "0", "-1")
	mustDo(t, s, "OK", "SET", "std:k2", "x")
	mustDo(t, s, "x\n\nx", "MGET", "std:k2", "std:missing", "std:k2")
	_, err := s.Do("INCR", "std:k")
	var rerr redistest.ReplyError
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("INCR on a string: err = %v, want a ReplyError", err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := quickPing(s.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("PING answered after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	mustDo(t, s, "PONG", "PING")

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if reply, err := quickPing(s.Addr(), 300*time.Millisecond); err == nil {
		t.Fatalf("PING on a paused server answered %q", reply)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if reply, err := quickPing(s.Addr(), time.Second); err != nil || reply != "+PONG" {
		t.Fatalf("PING after Resume = %q, %v", reply, err)
	}

	s.Stop()
	s.Stop() // idempotent
}

func TestPassword(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, "--requirepass", "sekret")
	mustDo(t, s, "OK", "SET", "pw:k", "v")
	if reply, err := quickPing(s.Addr(), time.Second); err != nil || !strings.HasPrefix(reply, "-NOAUTH") {
		t.Fatalf("unauthenticated PING = %q, %v; want NOAUTH", reply, err)
	}
}

func TestShared(t *testing.T) {
	t.Parallel()
	a, b := redistest.Shared(t), redistest.Shared(t)
	if a != b {
		t.Fatalf("Shared returned %s and %s", a.Addr(), b.Addr())
	}
	mustDo(t, a, "OK", "SET", "shared:k", "v")
	mustDo(t, b, "v", "GET", "shared:k")
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	t.Logf("cluster 3+3 ready in %v", time.Since(start).Round(time.Millisecond))
	if n := len(c.Nodes()); n != 6 || len(c.Addrs()) != 6 {
		t.Fatalf("%d nodes, want 6", n)
	}
	for _, n := range c.Nodes() {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("%s: CLUSTER INFO:\n%s", n.Addr(), info)
		}
	}
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}

	keys := []string{"cl:a", "cl:b", "cl:c", "cl:{user1}:x", "cl:zz"}
	for _, key := range keys {
		m, err := c.MasterFor(key)
		if err != nil {
			t.Fatal(err)
		}
		mustDo(t, m, "OK", "SET", key, "v")
		// Replication is asynchronous: the failover below must not lose
		// the write to a kill that comes before the replica has it.
		if err := m.WaitReplicated(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Some other node must redirect.
	m, _ := c.MasterFor("cl:a")
	for _, n := range c.Masters() {
		if n == m {
			continue
		}
		if _, err := n.Do("GET", "cl:a"); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
			t.Fatalf("GET on %s (not owner %s): err = %v, want MOVED", n.Addr(), m.Addr(), err)
		}
	}

	// Failover: kill the master of cl:a; its replica takes over.
	start = time.Now()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	m2, err := c.MasterFor("cl:a")
	if err != nil {
		t.Fatal(err)
	}
	if m2 == m {
		t.Fatal("killed master still serves cl:a")
	}
	mustDo(t, m2, "v", "GET", "cl:a")
	t.Logf("failover in %v", time.Since(start).Round(time.Millisecond))

	// The old master comes back as a replica.
	start = time.Now()
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	role, err := m.Do("ROLE")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(role, "slave\n") {
		t.Fatalf("restarted old master ROLE = %q, want slave", role)
	}
	t.Logf("rejoin in %v", time.Since(start).Round(time.Millisecond))
}

// TestExclusive: two tests that take the fault-test lock do not run at
// once.
func TestExclusive(t *testing.T) {
	var mu sync.Mutex
	var holders, most int
	for _, name := range []string{"a", "b", "c"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			redistest.Exclusive(t)
			mu.Lock()
			holders++
			most = max(most, holders)
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			holders--
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		if most != 1 {
			t.Errorf("%d tests held the lock at once", most)
		}
	})
}
