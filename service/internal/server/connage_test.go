package server

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// TestHTTPConnectionAgeCutsRevokedClient: under HTTPTLS mtls, a client
// whose CA the reloaded CA file no longer holds is refused new connections,
// and its keep-alive connection ends within HTTPMaxConnectionAge: it then
// decides nothing more.
func TestHTTPConnectionAgeCutsRevokedClient(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, fmt.Sprintf(ruleFile, 1_000_000))
	const age = time.Second
	s := runServer(t, Options{ConfigPath: rules, TLSCertFile: f.cert, TLSKeyFile: f.key, TLSClientCAFile: f.caPEM,
		HTTPTLS: HTTPTLSMutual, HTTPMaxConnectionAge: age})
	// One connection, kept alive, as a proxy's.
	tr := &http.Transport{TLSClientConfig: tlstest.ClientConfig(f.ca, f.ca.Client(t, "revoked")), MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	url := "https://" + s.HTTPAddr()
	waitFor(t, "a decision over mutual TLS", func() bool {
		code, _, err := postJSON(c, url, "10.0.0.2")
		return err == nil && code == http.StatusOK
	})

	// The client's CA leaves the CA file.
	other := tlstest.NewCA(t, "other CA")
	tlstest.WriteFile(t, f.caPEM, other.PEM)
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tr.TLSClientConfig, DisableKeepAlives: true}}
	if _, _, err := postJSON(fresh, url, "10.0.0.2"); err == nil {
		t.Fatal("a new connection of the removed CA was served")
	}

	// Its open connection decides until its age at most, then never again.
	removed := time.Now()
	deadline := removed.Add(age + age/10 + 5*time.Second)
	var refusedAt time.Time
	for time.Now().Before(deadline) {
		code, _, err := postJSON(c, url, "10.0.0.2")
		switch {
		case err == nil && code == http.StatusOK && !refusedAt.IsZero():
			t.Fatalf("served again %v after the first refusal", time.Since(refusedAt))
		case err != nil && refusedAt.IsZero():
			refusedAt = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if refusedAt.IsZero() {
		t.Fatalf("the removed CA's keep-alive connection still decides %v after the CA was removed (age %v)", time.Since(removed), age)
	}
	t.Logf("cut off %v after the CA was removed", refusedAt.Sub(removed))
}

// TestHTTPConnectionAgeEndsStreams: a response that never ends (the
// dashboard's event stream) is cut off a grace period after the
// connection's age, so no connection outlives its age by more.
func TestHTTPConnectionAgeEndsStreams(t *testing.T) {
	t.Parallel()
	const age = 500 * time.Millisecond
	s := runServer(t, Options{HTTPMaxConnectionAge: age})
	c := &http.Client{Timeout: time.Minute}
	start := time.Now()
	resp, err := c.Get("http://" + s.HTTPAddr() + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/events: %d", resp.StatusCode)
	}
	io.Copy(io.Discard, resp.Body) // until the server ends it
	took := time.Since(start)
	if min, max := age-age/10, age+age/10+maxConnectionAgeGrace+10*time.Second; took < min || took > max {
		t.Errorf("the event stream ended after %v; want between %v and %v", took, min, max)
	}
	t.Logf("ended after %v", took)
}
