package tlsreload

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// maxFileBytes bounds what is read of each file. A chain of a few
// certificates, a key or a CA bundle is a few kilobytes. The system's CA
// bundle is a few hundred kilobytes.
const maxFileBytes = 1 << 20

// Files names the PEM files of a server's TLS identity.
type Files struct {
	// Cert holds the server's certificate, then any intermediate
	// certificates of its chain. Required.
	Cert string
	// Key holds the certificate's private key (PKCS #1, PKCS #8 or SEC 1).
	// Required.
	Key string
	// ClientCA holds the CA certificates a client's certificate must chain
	// to, where a listener asks for one ([Listener].ClientAuth). Empty: no
	// listener may ask.
	ClientCA string
}

// identity is what one load made of the files.
type identity struct {
	cert      tls.Certificate
	leaf      *x509.Certificate
	clientCAs *x509.CertPool // nil without Files.ClientCA
	sum       [sha256.Size]byte
}

// load reads and checks the files at now.
func load(f Files, now time.Time) (*identity, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%w: a certificate needs both its file and its key's", ErrFile)
	}
	h := sha256.New()
	certPEM, err := readFile(f.Cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(f.Key)
	if err != nil {
		return nil, err
	}
	if err := whole(f.Cert, certPEM); err != nil {
		return nil, err
	}
	if err := whole(f.Key, keyPEM); err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s with key %s: %v", ErrFile, f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFile, f.Cert, err)
		}
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%w: %s: the certificate expired at %s", ErrFile, f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	id := &identity{cert: cert, leaf: leaf}
	if f.ClientCA != "" {
		caPEM, err := readFile(f.ClientCA)
		if err != nil {
			return nil, err
		}
		if id.clientCAs, err = certPool(f.ClientCA, caPEM); err != nil {
			return nil, err
		}
		h.Write([]byte{0})
		h.Write(caPEM)
	}
	h.Sum(id.sum[:0])
	return id, nil
}

// readFile returns the content of a regular file of at most maxFileBytes.
// Its errors name the file, never what it holds.
func readFile(name string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would wait for a writer.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrFile, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFile, name, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", ErrFile, name, maxFileBytes)
	}
	return b, nil
}

// whole checks that data is PEM blocks and nothing else. A file cut short
// while it was written ends in half a block. The PEM decoder would
// silently skip it, leaving a chain without its last certificate.
func whole(name string, data []byte) error {
	rest, n := data, 0
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		rest, n = r, n+1
	}
	switch {
	case n == 0:
		return fmt.Errorf("%w: %s holds no PEM block", ErrFile, name)
	case len(bytes.TrimSpace(rest)) > 0:
		return fmt.Errorf("%w: %s ends in %d bytes that are not a whole PEM block (a file cut short?)", ErrFile, name, len(bytes.TrimSpace(rest)))
	}
	return nil
}

// certPool returns the CERTIFICATE blocks of a CA file as a pool; any
// other block, or a certificate that does not parse, is an error.
func certPool(name string, data []byte) (*x509.CertPool, error) {
	if err := whole(name, data); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for rest := data; ; {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		rest = r
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: %s holds a %q block; a CA file holds certificates only", ErrFile, name, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFile, name, err)
		}
		pool.AddCert(c)
	}
	return pool, nil
}
