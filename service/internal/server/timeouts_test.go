package server

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"
)

// The idle and handshake limits of GRPCOptions are applied: a connection
// that sends nothing is closed after handshakeTimeout, and one whose last
// request is older than maxConnectionIdle gets a GOAWAY (its client goes
// idle, to reconnect when it next needs to). Both are shortened here, so
// the test is not parallel: the variables are read when a server starts.
func TestGRPCIdleAndHandshakeTimeouts(t *testing.T) {
	defer func(idle, handshake time.Duration) { maxConnectionIdle, handshakeTimeout = idle, handshake }(maxConnectionIdle, handshakeTimeout)
	maxConnectionIdle, handshakeTimeout = 300*time.Millisecond, 300*time.Millisecond
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 10))
	r := start(t, Options{ConfigPath: path})

	// A connection that never sends the HTTP/2 preface.
	c, err := net.Dial("tcp", r.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if open := stillOpen(c); open > 0 {
		t.Fatalf("a connection that sent nothing was still open after %v", open)
	}

	// A client whose one request is done.
	r.decide(t, "ip", "10.0.0.1")
	if s := r.conn.GetState(); s != connectivity.Ready {
		t.Fatalf("after a request the connection is %v, want READY", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for s := r.conn.GetState(); s == connectivity.Ready; s = r.conn.GetState() {
		if !r.conn.WaitForStateChange(ctx, s) {
			t.Fatal("the idle connection was not closed within 20 s")
		}
	}
	r.decide(t, "ip", "10.0.0.1") // the client reconnects
}

// The HTTP server's timeouts are applied: a request header that never ends
// (a slow client holding a connection) is cut off after readHeaderTimeout,
// and a keep-alive connection idle after its request after idleTimeout.
// Not parallel, as above.
func TestHTTPHeaderAndIdleTimeouts(t *testing.T) {
	defer func(header, idle time.Duration) { readHeaderTimeout, idleTimeout = header, idle }(readHeaderTimeout, idleTimeout)
	readHeaderTimeout, idleTimeout = 300*time.Millisecond, 300*time.Millisecond
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 10))
	r := start(t, Options{ConfigPath: path})

	for _, tc := range []struct{ name, send string }{
		{"half a header", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "},
		{"idle after a request", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
	} {
		c, err := net.Dial("tcp", r.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(tc.send)); err != nil {
			t.Fatal(err)
		}
		if open := stillOpen(c); open > 0 {
			t.Errorf("%s: the connection was still open after %v", tc.name, open)
		}
	}
}

// stillOpen reads c until the server closes it, for at most 20 s, and
// returns how long it waited if the server had not closed it by then, or 0.
func stillOpen(c net.Conn) time.Duration {
	began := time.Now()
	c.SetReadDeadline(began.Add(20 * time.Second))
	buf := make([]byte, 4096)
	var err error
	for err == nil {
		_, err = c.Read(buf)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return time.Since(began)
	}
	return 0
}
