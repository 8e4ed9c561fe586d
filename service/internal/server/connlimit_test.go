package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPConnectionCap: clients that hold HTTP connections open take at
// most HTTPMaxConnections of them; one more is closed on arrival and
// counted, and a place given back serves again.
func TestHTTPConnectionCap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 5))
	r := start(t, Options{ConfigPath: path, HTTPMaxConnections: 3})
	http.DefaultClient.CloseIdleConnections() // the readiness probe's
	time.Sleep(200 * time.Millisecond)        // for the server to see it go
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", r.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", r.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a fourth connection with 3 held: read %d, %v; want it closed (EOF)", n, err)
	}
	held[0].Close()
	// Once the server has seen it go, the place serves again. Refusals
	// while it has not yet are counted too.
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + r.HTTPAddr() + "/metrics")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place given back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(string(body), "redlimit_http_connections_refused_total") {
		t.Fatalf("no refusal counter in /metrics")
	}
	if got := r.metric(t, "redlimit_http_connections_refused_total"); got < 1 {
		t.Errorf("refused connections counted: %v, want at least 1", got)
	}
}
