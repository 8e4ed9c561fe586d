package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/redlimit/redlimit/service/internal/tlsreload"
	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// TestTLSOptionErrors: TLS options that do not go together, or files that
// do not load, are New's errors.
func TestTLSOptionErrors(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	for _, tc := range []struct {
		name string
		o    Options
		want error
	}{
		{"cert without key", Options{TLSCertFile: cert}, ErrOptions},
		{"key without cert", Options{TLSKeyFile: key}, ErrOptions},
		{"client CA without cert", Options{TLSClientCAFile: caFile}, ErrOptions},
		{"HTTP mtls without cert", Options{HTTPTLS: HTTPTLSMutual}, ErrOptions},
		{"HTTP mtls without client CA", Options{TLSCertFile: cert, TLSKeyFile: key, HTTPTLS: HTTPTLSMutual}, ErrOptions},
		{"a key of another", Options{TLSCertFile: cert, TLSKeyFile: caFile}, tlsreload.ErrFile},
	} {
		tc.o.GRPCAddr, tc.o.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
		tc.o.Logger = slog.New(slog.DiscardHandler)
		s, err := New(context.Background(), tc.o)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
		if s != nil {
			s.Close()
		}
	}
	var m HTTPTLS
	if err := m.UnmarshalText([]byte("MTLS")); err != nil || m != HTTPTLSMutual {
		t.Errorf("mtls: %v, %v", m, err)
	}
	if err := m.UnmarshalText([]byte("strict")); !errors.Is(err, ErrOptions) {
		t.Errorf("strict: %v", err)
	}
}

// TestHTTPTLSModes: --http-tls off serves plain HTTP beside TLS gRPC; mtls
// refuses an HTTP client without a certificate.
func TestHTTPTLSModes(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	get := func(c *http.Client, url string) (int, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	client := func(leaf *tlstest.Leaf) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlstest.ClientConfig(ca, leaf)}}
	}
	newServer := func(mode HTTPTLS) *Server {
		return runServer(t, Options{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: caFile, HTTPTLS: mode})
	}

	plain := newServer(HTTPTLSOff)
	waitFor(t, "plain HTTP", func() bool {
		code, err := get(http.DefaultClient, "http://"+plain.HTTPAddr()+"/healthz")
		return err == nil && code == http.StatusOK
	})

	mutual := newServer(HTTPTLSMutual)
	url := "https://" + mutual.HTTPAddr() + "/healthz"
	waitFor(t, "HTTPS with a client certificate", func() bool {
		code, err := get(client(ca.Client(t, "prometheus")), url)
		return err == nil && code == http.StatusOK
	})
	if code, err := get(client(nil), url); err == nil {
		t.Errorf("HTTPS without a client certificate: %d", code)
	}
}
