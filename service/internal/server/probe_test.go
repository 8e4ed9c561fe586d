package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestProbesAnswerWithHTTPCapHeld: clients that hold every place of the
// HTTP address (HTTPMaxConnections) do not starve the probes, which the
// probe address answers in plain HTTP, whatever the HTTP address serves.
// It decides nothing.
func TestProbesAnswerWithHTTPCapHeld(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, fmt.Sprintf(ruleFile, 5))
	s := runServer(t, Options{ConfigPath: rules, HTTPMaxConnections: 3, ProbeAddr: "127.0.0.1:0",
		TLSCertFile: f.cert, TLSKeyFile: f.key, TLSClientCAFile: f.caPEM})
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) int {
		resp, err := probe.Get("http://" + s.ProbeAddr() + path)
		if err != nil {
			t.Logf("GET %s: %v", path, err)
			return 0
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	waitFor(t, "ready", func() bool { return get("/readyz") == http.StatusOK })

	// Hold every place of the HTTP address with idle connections.
	for range 3 {
		c, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	extra, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a fourth HTTP connection with 3 held: read %d, %v; want it closed (EOF)", n, err)
	}

	for range 5 {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code := get(path); code != http.StatusOK {
				t.Fatalf("GET %s on the probe address with the HTTP cap held: %d; want 200", path, code)
			}
		}
	}
	for _, path := range []string{"/json", "/metrics", "/rules", "/"} {
		if code := get(path); code != http.StatusNotFound {
			t.Errorf("GET %s on the probe address: %d; want 404 (probes only)", path, code)
		}
	}
}
