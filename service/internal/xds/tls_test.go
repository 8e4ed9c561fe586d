package xds

import (
	"context"
	"crypto/tls"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/redlimit/redlimit/service/internal/tlstest"
	"github.com/redlimit/redlimit/service/internal/xds/xdstest"
)

// TestClientTLS checks the client's TLS settings against an xDS server
// that requires client certificates: with its CA, certificate and the
// server's name it takes the rules; without a certificate, or trusting
// another CA, it takes none.
func TestClientTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "xds-ca")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	certFile, keyFile := ca.Client(t, "redlimit").Write(t, dir, "client")
	other := tlstest.NewCA(t, "other-ca")
	otherFile := filepath.Join(dir, "other.pem")
	tlstest.WriteFile(t, otherFile, other.PEM)

	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "xds").TLS},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	cp := xdstest.Start(t, "127.0.0.1:0", grpc.Creds(creds))
	cp.Set(t, DefaultNodeID, "1", xdstest.Rules("gw", "web", "ip", 3))

	tests := []struct {
		name                string
		ca, cert, key, host string
		want                bool
	}{
		{"mutual TLS", caFile, certFile, keyFile, "localhost", true},
		{"no client certificate", caFile, "", "", "localhost", false},
		{"another CA", otherFile, certFile, keyFile, "localhost", false},
		{"another server name", caFile, certFile, keyFile, "xds.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := TLSConfig(tt.ca, tt.cert, tt.key, tt.host)
			if err != nil {
				t.Fatal(err)
			}
			got := &applied{}
			c, err := New(Options{ServerURL: cp.Addr, TLS: cfg, Apply: got.apply, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() {
				cancel()
				<-done
			}()
			if tt.want {
				waitFor(t, "rules over TLS", func() bool { return got.count() == 1 })
				return
			}
			time.Sleep(500 * time.Millisecond)
			if got.count() != 0 {
				t.Error("rules taken over a connection that should have failed")
			}
		})
	}
	if _, err := TLSConfig(caFile, certFile, "", ""); err == nil {
		t.Error("a certificate without its key: no error")
	}
	if _, err := TLSConfig(certFile+".missing", "", "", ""); err == nil {
		t.Error("a missing CA file: no error")
	}
}
