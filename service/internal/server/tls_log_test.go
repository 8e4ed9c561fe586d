package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// TestHandshakeFailuresLogThrottled: failed TLS handshakes on both
// listeners share one throttle of a line a second, and a client that
// closes before its hello (a TCP health check) logs nothing.
func TestHandshakeFailuresLogThrottled(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	logs := &syncBuffer{}
	s, err := New(context.Background(), Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: caFile,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	lines := func() int { return strings.Count(logs.String(), "handshake") }
	// talk connects, writes what (nothing: a TCP check), and reads until
	// the server closes.
	talk := func(addr, what string) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if what == "" {
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, what)
		io.Copy(io.Discard, c)
	}
	const n = 30
	for range n {
		talk(s.HTTPAddr(), "")
		talk(s.GRPCAddr(), "")
	}
	time.Sleep(300 * time.Millisecond) // the server's side of the last ones
	if got := lines(); got != 0 {
		t.Fatalf("%d lines for %d TCP checks:\n%s", got, 2*n, logs)
	}
	start := time.Now()
	for range n {
		talk(s.HTTPAddr(), "GET /healthz HTTP/1.0\r\n\r\n")
		talk(s.GRPCAddr(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	}
	time.Sleep(300 * time.Millisecond)
	// One line a second over both listeners, plus the first.
	if got, max := lines(), int(time.Since(start)/time.Second)+1; got > max || got == 0 {
		t.Fatalf("%d lines for %d failed handshakes in %v, want 1 to %d:\n%s", got, 2*n, time.Since(start), max, logs)
	}
}
