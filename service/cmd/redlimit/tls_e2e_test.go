package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/service/internal/tlstest"
)

// tlsRules limit one descriptor, so that an answer shows the rules apply.
const tlsRules = `domain: tls
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1000
`

// secretDir lays out files as Kubernetes mounts a Secret: each a link into
// ..data, a link to a directory of the files that an update swaps by
// renaming a new link over it.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func (s *secretDir) update(files map[string][]byte) {
	s.t.Helper()
	s.gen++
	gen := filepath.Join(s.dir, "..gen"+strings.Repeat("x", s.gen))
	if err := os.Mkdir(gen, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(gen, name), data, 0o600); err != nil {
			s.t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(s.dir, name)); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, name)); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

// tlsAsk makes one ShouldRateLimit call on a new connection with cfg, and
// returns the serial number of the server's certificate.
func tlsAsk(addr string, cfg *tls.Config) (string, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx,
		&pb.RateLimitRequest{Domain: "tls", Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "u1")}}, grpc.Peer(&p))
	if err != nil {
		return "", err
	}
	if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit == nil {
		return "", status.Errorf(codes.Internal, "answer %v", resp)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", status.Error(codes.Internal, "no TLS on the connection")
	}
	return info.State.PeerCertificates[0].SerialNumber.String(), nil
}

// TestServeTLS runs the binary with a certificate, its key and a client CA
// as a mounted Secret holds them: gRPC serves mutual TLS only, HTTP serves
// TLS, a client without a certificate or with one of another CA is refused
// (and counted), an updated certificate is served without a restart, and a
// broken update leaves the last good one serving.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	ca, rogue := tlstest.NewCA(t, "redlimit test CA"), tlstest.NewCA(t, "rogue CA")
	first, second := ca.Server(t, "redlimit-1"), ca.Server(t, "redlimit-2")
	envoy, intruder := ca.Client(t, "envoy"), rogue.Client(t, "envoy")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "rules.yaml")
	writeFile(t, cfgFile, tlsRules)
	sec := &secretDir{t: t, dir: filepath.Join(dir, "tls")}
	if err := os.Mkdir(sec.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sec.update(map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM, "ca.crt": ca.PEM})
	p := startProc(t, nil, "--config="+cfgFile,
		"--tls-cert-file="+filepath.Join(sec.dir, "tls.crt"), "--tls-key-file="+filepath.Join(sec.dir, "tls.key"),
		"--tls-client-ca-file="+filepath.Join(sec.dir, "ca.crt"))

	mtls := tlstest.ClientConfig(ca, envoy)
	if sn, err := tlsAsk(p.grpcAddr, mtls); err != nil || sn != first.Cert.SerialNumber.String() {
		t.Fatalf("a client of the CA: %s, %v", sn, err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no client certificate":           tlstest.ClientConfig(ca, nil),
		"a certificate of another CA":     tlstest.ClientConfig(ca, intruder),
		"a client that trusts another CA": tlstest.ClientConfig(rogue, envoy),
	} {
		if _, err := tlsAsk(p.grpcAddr, cfg); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v; want Unavailable (refused)", name, err)
		}
	}
	// Plain text on the TLS address: refused too.
	plain, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pb.NewRateLimitServiceClient(plain).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "tls"}); status.Code(err) != codes.Unavailable {
		t.Errorf("a client without TLS: %v; want Unavailable", err)
	}
	plain.Close()

	// HTTP serves TLS without asking for a client certificate.
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlstest.ClientConfig(ca, nil), DisableKeepAlives: true}}
	get := func(path string) (string, string) {
		t.Helper()
		resp, err := https.Get("https://" + p.httpAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.TLS.PeerCertificates[0].SerialNumber.String(), string(b)
	}
	if sn, body := get("/readyz"); sn != first.Cert.SerialNumber.String() || body != "ready\n" {
		t.Fatalf("GET /readyz over TLS: %s, %q", sn, body)
	}
	if resp, err := http.Get("http://" + p.httpAddr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served on the TLS address")
		}
	}
	metric := func(series string) float64 {
		_, page := get("/metrics")
		return seriesValue(page, series)
	}
	if n := metric("redlimit_tls_handshake_failures_total"); n < 3 {
		t.Errorf("handshake failures counted: %v, want at least 3", n)
	}
	if n := metric("redlimit_tls_certificate_not_after_timestamp_seconds"); n != float64(first.Cert.NotAfter.Unix()) {
		t.Errorf("not-after: %v, want %d", n, first.Cert.NotAfter.Unix())
	}

	// An update of the Secret: the next connections get the new certificate.
	sec.update(map[string][]byte{"tls.crt": second.CertPEM, "tls.key": second.KeyPEM, "ca.crt": ca.PEM})
	waitFor(t, "the updated certificate", func() bool {
		sn, err := tlsAsk(p.grpcAddr, mtls)
		return err == nil && sn == second.Cert.SerialNumber.String()
	})
	if sn, _ := get("/healthz"); sn != second.Cert.SerialNumber.String() {
		t.Fatalf("HTTP after the update: %s, want the second certificate", sn)
	}
	// A broken update (a certificate without its key): the second keeps
	// serving, and the failure is counted and logged.
	sec.update(map[string][]byte{"tls.crt": first.CertPEM, "tls.key": second.KeyPEM, "ca.crt": ca.PEM})
	waitFor(t, "the broken update counted", func() bool {
		return metric(`redlimit_tls_reloads_total{result="failure"}`) >= 1
	})
	if sn, err := tlsAsk(p.grpcAddr, mtls); err != nil || sn != second.Cert.SerialNumber.String() {
		t.Fatalf("after a broken update: %s, %v; want the second certificate", sn, err)
	}
	if !strings.Contains(p.logs.String(), "TLS files rejected") {
		t.Errorf("the broken update was not logged:\n%s", p.logs.String())
	}
}

// TestServeUnixSockets runs the binary on Unix sockets of the mode asked,
// serving gRPC and HTTP, and removing them when it stops.
func TestServeUnixSockets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "rules.yaml")
	writeFile(t, cfgFile, tlsRules)
	grpcSock, httpSock := filepath.Join(dir, "grpc.sock"), filepath.Join(dir, "http.sock")
	p := startProc(t, nil, "--config="+cfgFile, "--grpc-addr=unix:"+grpcSock, "--http-addr=unix://"+httpSock, "--unix-socket-mode=0600")
	if p.grpcAddr != "unix:"+grpcSock || p.httpAddr != "unix:"+httpSock {
		t.Fatalf("serving on %s and %s", p.grpcAddr, p.httpAddr)
	}
	for _, s := range []string{grpcSock, httpSock} {
		if fi, err := os.Lstat(s); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want a socket of mode 0600", s, fi.Mode(), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := p.ask(ctx, "tls", desc("user", "u1"))
	if err != nil || resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("gRPC over the socket: %v, %v", resp, err)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", httpSock)
		},
	}}
	hr, err := c.Get("http://localhost/readyz")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz over the socket: %d", hr.StatusCode)
	}
	if err := p.stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	for _, s := range []string{grpcSock, httpSock} {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Errorf("%s after the stop: %v; want it removed", s, err)
		}
	}
}
