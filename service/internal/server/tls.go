package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/redlimit/redlimit/service/internal/tlsreload"
)

// HTTPTLS says what the HTTP address serves when the server has a
// certificate (Options.TLSCertFile).
type HTTPTLS uint8

const (
	// HTTPTLSOn, the zero value: TLS, no client certificate asked, so that
	// the kubelet's HTTPS probes and a Prometheus that trusts the CA
	// reach /readyz and /metrics.
	HTTPTLSOn HTTPTLS = iota
	// HTTPTLSOff: plain HTTP, while gRPC serves TLS.
	HTTPTLSOff
	// HTTPTLSMutual: TLS, and a client certificate verified against
	// Options.TLSClientCAFile, as on gRPC. Probes and scrapers must then
	// present one.
	HTTPTLSMutual
)

var httpTLSNames = [...]string{"on", "off", "mtls"}

// String returns the mode's flag value: "on", "off" or "mtls".
func (m HTTPTLS) String() string {
	if int(m) < len(httpTLSNames) {
		return httpTLSNames[m]
	}
	return fmt.Sprintf("HTTPTLS(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler.
func (m HTTPTLS) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: "on", "off" or "mtls".
func (m *HTTPTLS) UnmarshalText(b []byte) error {
	for i, name := range httpTLSNames {
		if strings.EqualFold(strings.TrimSpace(string(b)), name) {
			*m = HTTPTLS(i)
			return nil
		}
	}
	return fmt.Errorf("%w: HTTP TLS mode %q: want on, off or mtls", ErrOptions, b)
}

// ALPN protocols of each address: gRPC is HTTP/2, the HTTP server serves
// HTTP/1.1 only, as it does in clear text.
var (
	grpcProtos = []string{"h2"}
	httpProtos = []string{"http/1.1"}
)

// setupTLS loads the TLS files of the options, if any, and checks that they
// go together.
func (s *Server) setupTLS() error {
	o := s.opts
	if o.TLSCertFile == "" && o.TLSKeyFile == "" {
		if o.TLSClientCAFile != "" {
			return fmt.Errorf("%w: TLSClientCAFile without a certificate (TLSCertFile, TLSKeyFile)", ErrOptions)
		}
		if o.HTTPTLS == HTTPTLSMutual {
			return fmt.Errorf("%w: HTTPTLS mtls without a certificate (TLSCertFile, TLSKeyFile)", ErrOptions)
		}
		if len(o.TLSClientSANs) > 0 {
			return fmt.Errorf("%w: TLSClientSANs without a certificate (TLSCertFile, TLSKeyFile)", ErrOptions)
		}
		return nil
	}
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		return fmt.Errorf("%w: TLSCertFile and TLSKeyFile go together: give both", ErrOptions)
	}
	if o.HTTPTLS > HTTPTLSMutual {
		return fmt.Errorf("%w: unknown HTTPTLS %d", ErrOptions, o.HTTPTLS)
	}
	if len(o.TLSClientSANs) > 0 && o.TLSClientCAFile == "" {
		return fmt.Errorf("%w: TLSClientSANs needs TLSClientCAFile to verify the clients' certificates", ErrOptions)
	}
	if o.HTTPTLS == HTTPTLSMutual && o.TLSClientCAFile == "" {
		return fmt.Errorf("%w: HTTPTLS mtls needs TLSClientCAFile to verify the clients' certificates", ErrOptions)
	}
	r, err := tlsreload.New(tlsreload.Files{Cert: o.TLSCertFile, Key: o.TLSKeyFile, ClientCA: o.TLSClientCAFile},
		tlsreload.Options{Debounce: o.ReloadDebounce, Logger: s.log, Loaded: s.metrics.TLSLoaded})
	if err != nil {
		return fmt.Errorf("server: TLS: %w", err)
	}
	s.tls = r
	return nil
}

// httpSANs returns the SAN allow-list of the HTTP address: that of gRPC
// under HTTPTLSMutual, none otherwise.
func httpSANs(o Options) []string {
	if o.HTTPTLS == HTTPTLSMutual {
		return o.TLSClientSANs
	}
	return nil
}

// grpcTLS returns ln serving TLS for gRPC, client certificates required
// with a client CA, or ln itself without a certificate.
func (s *Server) grpcTLS(ln net.Listener) (net.Listener, error) {
	if s.tls == nil {
		return ln, nil
	}
	cfg, err := s.tls.TLSConfig(tlsreload.Listener{ClientAuth: s.opts.TLSClientCAFile != "", ClientSANs: s.opts.TLSClientSANs, NextProtos: grpcProtos})
	if err != nil {
		return nil, fmt.Errorf("server: gRPC TLS: %w", err)
	}
	return &tlsListener{Listener: ln, cfg: cfg, s: s}, nil
}

// httpTLS returns ln serving TLS for HTTP as Options.HTTPTLS says, or ln
// itself. net/http shakes hands itself (within its ReadHeaderTimeout), and
// reports a failed handshake to its ErrorLog (httpErrorLog).
func (s *Server) httpTLS(ln net.Listener) (net.Listener, error) {
	if s.tls == nil || s.opts.HTTPTLS == HTTPTLSOff {
		return ln, nil
	}
	cfg, err := s.tls.TLSConfig(tlsreload.Listener{ClientAuth: s.opts.HTTPTLS == HTTPTLSMutual, ClientSANs: httpSANs(s.opts), NextProtos: httpProtos})
	if err != nil {
		return nil, fmt.Errorf("server: HTTP TLS: %w", err)
	}
	return tls.NewListener(ln, cfg), nil
}

// grpcTLSMode and httpTLSMode name what each address serves, for the log:
// off, tls or mtls.
func (s *Server) grpcTLSMode() string {
	switch {
	case s.tls == nil:
		return "off"
	case s.opts.TLSClientCAFile != "":
		return "mtls"
	}
	return "tls"
}

func (s *Server) httpTLSMode() string {
	switch {
	case s.tls == nil || s.opts.HTTPTLS == HTTPTLSOff:
		return "off"
	case s.opts.HTTPTLS == HTTPTLSMutual:
		return "mtls"
	}
	return "tls"
}

// ReloadTLS loads the TLS files again (as a change to them does): files
// that do not load are logged, counted
// (redlimit_tls_reloads_total{result="failure"}) and returned, and the
// certificate in use keeps serving. Without TLS it does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	return s.tls.Reload()
}

// tlsListener serves TLS on the gRPC address, beneath the connection guard,
// which reads the decrypted frames. A failed handshake is counted and
// logged (handshakeFailed).
type tlsListener struct {
	net.Listener
	cfg *tls.Config
	s   *Server
}

// Accept returns the next connection; its handshake is made by its first
// read or write, within the deadline grpc-go sets for the connection's
// setup (handshakeTimeout).
func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(c, l.cfg), l: l}, nil
}

// handshakeFailed counts a failed handshake, and logs it through the one
// throttle of both listeners.
func (s *Server) handshakeFailed(listener, remote string, err error) {
	s.metrics.TLSHandshakeFailed()
	if ok, held := s.handshakeLogs.allow(); ok {
		s.log.Warn("TLS handshake failed", "listener", listener, "remote", remote, "err", err, "not_logged", held)
	}
}

// httpErrorLog is the HTTP server's ErrorLog. Its lines go to the log at
// Warn. But net/http's line for a failed handshake goes to
// handshakeFailed. One for a client that closed before its hello (a TCP
// check) is dropped, as on gRPC.
type httpErrorLog struct{ s *Server }

// httpHandshakeError starts net/http's line for a failed handshake.
const httpHandshakeError = "http: TLS handshake error from "

func (w httpErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	rest, ok := strings.CutPrefix(line, httpHandshakeError)
	if !ok {
		w.s.log.Warn(line)
		return len(p), nil
	}
	remote, reason, _ := strings.Cut(rest, ": ")
	if reason != io.EOF.Error() {
		w.s.handshakeFailed("http", remote, errors.New(reason))
	}
	return len(p), nil
}

// tlsConn is a server TLS connection that reports its failed handshake.
type tlsConn struct {
	*tls.Conn
	l    *tlsListener
	once sync.Once
	err  error
}

func (c *tlsConn) handshake() error {
	c.once.Do(func() {
		// io.EOF: the client closed before its hello, as a TCP check
		// does; not a failure of TLS.
		if c.err = c.Conn.Handshake(); c.err != nil && !errors.Is(c.err, io.EOF) {
			c.l.s.handshakeFailed("grpc", c.RemoteAddr().String(), c.err)
		}
	})
	return c.err
}

// Read shakes hands first.
func (c *tlsConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Write shakes hands first.
func (c *tlsConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
