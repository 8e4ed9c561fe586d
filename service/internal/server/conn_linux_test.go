//go:build linux

package server

import (
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The guard's connections get the TCP_USER_TIMEOUT grpc-go sets on the
// connections it sees unwrapped (keepaliveTimeout).
func TestGuardSetsUserTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newConnGuard(10, 1<<30, nil)
	gl := g.listener(ln)
	defer gl.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := gl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*guardedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var gerr error
	raw.Control(func(fd uintptr) { ms, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout) })
	if gerr != nil || ms != int(keepaliveTimeout.Milliseconds()) {
		t.Fatalf("TCP_USER_TIMEOUT %d ms (%v), want %d", ms, gerr, keepaliveTimeout.Milliseconds())
	}
}

// An idle gRPC connection costs the server a bounded heap, read buffer
// included: GRPCMaxConnections times it is what idle connections can hold.
// 300 idle connections (each with the preface and settings sent) must
// cost under 48 KB each. (Not parallel: it measures the heap.)
func TestIdleConnectionCost(t *testing.T) {
	const conns = 300
	// The clients' own heap, on a listener that accepts and reads nothing.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	idle := func(addr string) int64 {
		before := liveHeap()
		for range conns {
			dialH2(t, addr)
		}
		time.Sleep(500 * time.Millisecond) // the server reads each preface
		return liveHeap() - before
	}
	clients := idle(sink.Addr().String())
	r := start(t, Options{})
	both := idle(r.GRPCAddr())
	waitFor(t, "every connection open", func() bool { return r.metric(t, "redlimit_grpc_connections") >= conns })
	per := float64(both-clients) / conns
	t.Logf("%.1f KB of server heap per idle connection", per/1024)
	if per > 48<<10 {
		t.Fatalf("%.1f KB of heap per idle connection, want under 48 KB", per/1024)
	}
}
