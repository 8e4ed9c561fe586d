package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartSentinel starts a Redis Sentinel on a free port that monitors master
// under name (quorum 1), stopped when tb ends. Connect to it with the
// sentinel's address and the master's name.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n", name, master.Port(), name)
	s, err := start(&Server{sentinel: conf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// TLSServer is a redis-server that also serves TLS.
type TLSServer struct {
	*Server
	// TLSAddr is the address of the TLS port.
	TLSAddr string
	// CAFile is the PEM file of the CA that signed the server's certificate.
	CAFile string
}

// StartTLS starts a redis-server with a TLS port (certificate for
// 127.0.0.1 signed by a CA made for the test; clients need no certificate)
// beside its plain one, stopped when tb ends.
func StartTLS(tb testing.TB) *TLSServer {
	tb.Helper()
	dir := tb.TempDir()
	ca, cert, key, err := makeCerts(dir)
	if err != nil {
		tb.Fatal(err)
	}
	port, err := pickPort(false)
	if err != nil {
		tb.Fatal(err)
	}
	s := Start(tb, "--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	return &TLSServer{Server: s, TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), CAFile: ca}
}

// makeCerts writes a CA and a server certificate for 127.0.0.1 into dir.
func makeCerts(dir string) (caFile, certFile, keyFile string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{caFile, "CERTIFICATE", caDER}, {certFile, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return "", "", "", err
		}
	}
	return caFile, certFile, keyFile, nil
}
