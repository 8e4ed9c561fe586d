package tlsreload

import (
	"path/filepath"
	"testing"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// TestClientSANs: with a SAN allow-list, a client certificate the CA signed
// is served only when one of its SANs is listed.
func TestClientSANs(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	r, err := New(Files{Cert: cert, Key: key, ClientCA: caFile}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.TLSConfig(Listener{ClientAuth: true, ClientSANs: []string{"envoy.example", "spiffe://cluster/ns/gw/sa/envoy"}})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, cfg)
	for _, tc := range []struct {
		name string
		tmpl tlstest.Template
		ok   bool
	}{
		{"listed DNS name", tlstest.Template{CommonName: "a", DNSNames: []string{"other.example", "envoy.example"}, Client: true}, true},
		{"listed URI", tlstest.Template{CommonName: "b", URIs: []string{"spiffe://cluster/ns/gw/sa/envoy"}, Client: true}, true},
		{"unlisted DNS name", tlstest.Template{CommonName: "envoy.example", DNSNames: []string{"intruder.example"}, Client: true}, false},
		{"no SAN, listed common name", tlstest.Template{CommonName: "envoy.example", Client: true}, false},
	} {
		_, err := s.dial(tlstest.ClientConfig(ca, ca.Issue(t, tc.tmpl)))
		if (err == nil) != tc.ok {
			t.Errorf("%s: dial error %v; want served %v", tc.name, err, tc.ok)
		}
	}
	if _, err := r.TLSConfig(Listener{ClientSANs: []string{"x"}}); err == nil {
		t.Error("ClientSANs without ClientAuth: no error")
	}
}
