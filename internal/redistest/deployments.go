package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartSentinel starts a Redis Sentinel on a free port that monitors master
// under name (quorum 1), stopped when tb ends. Connect to it with the
// sentinel's address and the master's name.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	return startSentinel(tb, fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n", name, master.Port(), name))
}

// startSentinel starts a sentinel of configuration conf, stopped when tb
// ends.
func startSentinel(tb testing.TB, conf string) *Server {
	tb.Helper()
	s, err := start(&Server{sentinel: conf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// SentinelGroup is a master, a replica of it and three sentinels
// monitoring the master, all on loopback.
type SentinelGroup struct {
	// Name is the master's name in the sentinels (their master_set).
	Name string
	// Master is the master the group started with, Replica its replica.
	// After a failover the sentinels name Replica as the master.
	Master, Replica *Server
	// Sentinels are the three sentinels.
	Sentinels []*Server
}

// StartSentinelGroup starts a master, a replica of it and three sentinels
// monitoring the master under name, stopped when tb ends. The sentinels
// fail over quickly. The quorum is 2. The master is down after 1 s without
// a reply (down-after-milliseconds). A failover that did not complete is
// tried again after 4 s (twice failover-timeout). It returns once the replica is
// in sync and every sentinel knows the replica and the other sentinels. So
// a master killed from then on is failed over to the replica. If the
// group cannot be started, StartSentinelGroup calls tb.Fatalf.
func StartSentinelGroup(tb testing.TB, name string) *SentinelGroup {
	tb.Helper()
	// Without the delay, a replica syncs at once rather than 5 s later
	// (diskless sync waits for more replicas by default); the replica
	// needs it too, as a master after the failover.
	flags := []string{"--repl-diskless-sync-delay", "0"}
	g := &SentinelGroup{Name: name, Master: Start(tb, flags...)}
	g.Replica = Start(tb, append(flags, "--replicaof", "127.0.0.1", strconv.Itoa(g.Master.Port()))...)
	// A sentinel learns the replicas from the master's INFO, which it asks
	// at once and then every 10 s: start the sentinels once the master
	// lists the replica.
	if err := waitUntil(10*time.Second, func() error {
		info, err := g.Replica.quickDo("INFO", "replication")
		if err != nil {
			return err
		}
		if st := infoField(info, "master_link_status"); st != "up" {
			return fmt.Errorf("replica %s: master_link_status %q", g.Replica.Addr(), st)
		}
		info, err = g.Master.quickDo("INFO", "replication")
		if err != nil {
			return err
		}
		if n := infoField(info, "connected_slaves"); n != "1" {
			return fmt.Errorf("master %s: connected_slaves %q", g.Master.Addr(), n)
		}
		return nil
	}); err != nil {
		tb.Fatalf("redistest: the replica did not sync: %v", err)
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 2000\n", name, g.Master.Port())
	for range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(tb, conf))
	}
	// The sentinels find each other through the hello messages they
	// publish on the master every 2 s.
	if err := waitUntil(20*time.Second, func() error {
		for _, s := range g.Sentinels {
			m, err := g.sentinelMaster(s)
			if err != nil {
				return err
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || m["flags"] != "master" {
				return fmt.Errorf("sentinel %s: flags %q, %s replicas, %s other sentinels", s.Addr(), m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return nil
	}); err != nil {
		tb.Fatalf("redistest: the sentinels did not converge: %v", err)
	}
	return g
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// MasterAddr returns the address of the master as the first sentinel that
// answers names it (SENTINEL GET-MASTER-ADDR-BY-NAME); paused sentinels
// are not asked.
func (g *SentinelGroup) MasterAddr() (string, error) {
	err := errors.New("redistest: no sentinel running")
	for _, s := range g.Sentinels {
		if !s.live() {
			continue
		}
		var out string
		if out, err = s.quickDo("SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.Name); err == nil {
			host, port, ok := strings.Cut(out, "\n")
			if !ok {
				return "", fmt.Errorf("redistest: sentinel %s: GET-MASTER-ADDR-BY-NAME %s: %q", s.Addr(), g.Name, out)
			}
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", err
}

// sentinelMaster returns the fields of SENTINEL MASTER on sentinel s.
func (g *SentinelGroup) sentinelMaster(s *Server) (map[string]string, error) {
	out, err := s.quickDo("SENTINEL", "MASTER", g.Name)
	if err != nil {
		return nil, err
	}
	f := strings.Split(out, "\n")
	m := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m, nil
}

// waitUntil calls check every 50 ms until it returns nil, and returns its
// last error if that takes longer than timeout.
func waitUntil(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TLSServer is a redis-server that also serves TLS.
type TLSServer struct {
	*Server
	// TLSAddr is the address of the TLS port.
	TLSAddr string
	// CAFile is the PEM file of the CA that signed the server's certificate.
	CAFile string
}

// StartTLS starts a redis-server with a TLS port beside its plain one,
// stopped when tb ends. The certificate is for 127.0.0.1, signed by a CA
// made for the test. Clients need no certificate.
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
