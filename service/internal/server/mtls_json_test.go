package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// tlsFiles are a server's TLS files, written by newTLSFiles.
type tlsFiles struct {
	ca               *tlstest.CA
	cert, key, caPEM string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "tls")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	return tlsFiles{ca: ca, cert: cert, key: key, caPEM: caFile}
}

// runServer makes and runs a Server of o on free loopback ports, until the
// end of the test.
func runServer(t *testing.T, o Options) *Server {
	t.Helper()
	if o.GRPCAddr == "" {
		o.GRPCAddr = "127.0.0.1:0"
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:0"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// postJSON posts one decision of key ip=value, domain web, to /json.
func postJSON(c *http.Client, url, value string) (int, string, error) {
	body := fmt.Sprintf(`{"domain":"web","descriptors":[{"entries":[{"key":"ip","value":%q}]}]}`, value)
	resp, err := c.Post(url+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// askGRPC asks the gRPC address, over TLS as cfg says, about ip=value.
func askGRPC(t *testing.T, addr string, cfg *tls.Config, value string) pb.RateLimitResponse_Code {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "web",
		Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: value}}}}})
	if err != nil {
		t.Fatalf("ShouldRateLimit over mutual TLS: %v", err)
	}
	return resp.OverallCode
}

// TestJSONRefusedWithoutClientCert: when gRPC requires client certificates
// (TLSClientCAFile), POST /json on an HTTP address that asks for none
// (HTTPTLS on or off) decides nothing: a client without a certificate can
// neither spend a key nor read it there. /readyz still answers.
func TestJSONRefusedWithoutClientCert(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, fmt.Sprintf(ruleFile, 1))
	envoy := tlstest.ClientConfig(f.ca, f.ca.Client(t, "envoy"))
	for _, tc := range []struct {
		mode   HTTPTLS
		scheme string
		client *tls.Config
	}{
		{HTTPTLSOn, "https", tlstest.ClientConfig(f.ca, nil)},
		{HTTPTLSOff, "http", nil},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			s := runServer(t, Options{ConfigPath: rules, TLSCertFile: f.cert, TLSKeyFile: f.key, TLSClientCAFile: f.caPEM, HTTPTLS: tc.mode})
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.client}}
			url := tc.scheme + "://" + s.HTTPAddr()
			waitFor(t, "ready", func() bool {
				resp, err := c.Get(url + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			code, body, err := postJSON(c, url, "10.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			if code != http.StatusForbidden {
				t.Errorf("POST /json without a client certificate: %d %s; want 403", code, body)
			}
			// The key of a limit of 1 is unspent: the proxy's own call passes.
			if got := askGRPC(t, s.GRPCAddr(), envoy, "10.0.0.1"); got != pb.RateLimitResponse_OK {
				t.Errorf("the proxy's call over mutual TLS after /json: %v; want OK (the key unspent)", got)
			}
		})
	}

	// Served: over mutual TLS with a client certificate, and without one
	// when the operator allows it.
	for _, tc := range []struct {
		name   string
		mode   HTTPTLS
		allow  bool
		client *tls.Config
	}{
		{"mtls", HTTPTLSMutual, false, envoy},
		{"on, allowed", HTTPTLSOn, true, tlstest.ClientConfig(f.ca, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := runServer(t, Options{ConfigPath: rules, TLSCertFile: f.cert, TLSKeyFile: f.key, TLSClientCAFile: f.caPEM,
				HTTPTLS: tc.mode, HTTPJSONWithoutClientCert: tc.allow})
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.client}}
			waitFor(t, "a decision over /json", func() bool {
				code, _, err := postJSON(c, "https://"+s.HTTPAddr(), "10.0.0.1")
				return err == nil && code == http.StatusOK
			})
		})
	}
}

// TestNoDecisionForAClientGRPCRefuses walks every TLS setting of the
// listeners: a client without a certificate gets a decision from POST
// /json exactly when gRPC would serve it or the operator allows it, and
// the probe address never decides.
func TestNoDecisionForAClientGRPCRefuses(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, fmt.Sprintf(ruleFile, 1000))
	for _, tlsOn := range []bool{false, true} {
		for _, clientCA := range []bool{false, true} {
			for _, mode := range []HTTPTLS{HTTPTLSOn, HTTPTLSOff, HTTPTLSMutual} {
				for _, allow := range []bool{false, true} {
					o := Options{ConfigPath: rules, HTTPTLS: mode, HTTPJSONWithoutClientCert: allow, ProbeAddr: "127.0.0.1:0",
						GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)}
					if tlsOn {
						o.TLSCertFile, o.TLSKeyFile = f.cert, f.key
					}
					if clientCA {
						o.TLSClientCAFile = f.caPEM
					}
					name := fmt.Sprintf("tls=%v,clientCA=%v,http=%v,allow=%v", tlsOn, clientCA, mode, allow)
					probe, err := New(context.Background(), o)
					if err != nil {
						continue // options that do not go together
					}
					probe.Close()
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						s := runServer(t, o)
						scheme := "http"
						if tlsOn && mode != HTTPTLSOff {
							scheme = "https"
						}
						// The client: no certificate (none could be sent under mtls).
						c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlstest.ClientConfig(f.ca, nil)}}
						code, body, err := postJSON(c, scheme+"://"+s.HTTPAddr(), "10.0.0.3")
						decided := err == nil && code == http.StatusOK
						// Under mtls the handshake itself refuses it, allowed or not.
						grpcServes := !clientCA
						if want := grpcServes || allow && mode != HTTPTLSMutual; decided != want {
							t.Errorf("POST /json without a client certificate decided: %v (%d %s %v); want %v", decided, code, body, err, want)
						}
						if code, _, err := postJSON(c, "http://"+s.ProbeAddr(), "10.0.0.3"); err != nil || code != http.StatusNotFound {
							t.Errorf("POST /json on the probe address: %d %v; want 404", code, err)
						}
					})
				}
			}
		}
	}
}
