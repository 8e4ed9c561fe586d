// Package tlstest makes certificate authorities and the certificates they
// sign, for tests of TLS and mutual TLS: ECDSA P-256 keys, made in the
// test, valid for a day unless asked otherwise.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is the CA's certificate in PEM, as a CA file holds it.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA returns a new self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool of the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is a certificate the CA signed, with its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	// TLS is the certificate and key as crypto/tls takes them.
	TLS tls.Certificate
}

// Template says what to put in a certificate; the zero value of each field
// is its default.
type Template struct {
	CommonName string
	// DNSNames and IPs are the names the certificate is for (default
	// localhost and 127.0.0.1).
	DNSNames []string
	IPs      []net.IP
	// URIs are URI SANs (a SPIFFE ID, say); none by default.
	URIs []string
	// NotBefore and NotAfter bound its validity (default from an hour ago
	// to a day from now).
	NotBefore, NotAfter time.Time
	// Client makes it a client certificate; otherwise it is a server's.
	Client bool
}

// Server returns a server certificate for localhost and 127.0.0.1.
func (ca *CA) Server(t testing.TB, cn string) *Leaf {
	t.Helper()
	return ca.Issue(t, Template{CommonName: cn})
}

// Client returns a client certificate named cn.
func (ca *CA) Client(t testing.TB, cn string) *Leaf {
	t.Helper()
	return ca.Issue(t, Template{CommonName: cn, Client: true})
}

// Issue returns a certificate made from tmpl, signed by the CA.
func (ca *CA) Issue(t testing.TB, tmpl Template) *Leaf {
	t.Helper()
	key := newKey(t)
	c := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: tmpl.CommonName},
		NotBefore:    tmpl.NotBefore,
		NotAfter:     tmpl.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     tmpl.DNSNames,
		IPAddresses:  tmpl.IPs,
	}
	for _, raw := range tmpl.URIs {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		c.URIs = append(c.URIs, u)
	}
	if tmpl.Client {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else if c.DNSNames == nil && c.IPAddresses == nil {
		c.DNSNames = []string{"localhost"}
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = time.Now().Add(-time.Hour)
	}
	if c.NotAfter.IsZero() {
		c.NotAfter = time.Now().Add(24 * time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, c, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
	if l.Cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return l
}

// Write writes the certificate and its key to dir as name.crt and
// name.key, and returns their paths.
func (l *Leaf) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, l.CertPEM)
	WriteFile(t, keyFile, l.KeyPEM)
	return certFile, keyFile
}

// WriteFile writes data to path, as a new file renamed over the old one, so
// that a reader never sees half of it.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// ClientConfig returns a client configuration that trusts ca and, when
// leaf is not nil, presents it.
func ClientConfig(ca *CA, leaf *Leaf) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.TLS}
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
