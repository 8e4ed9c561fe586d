package tlsreload

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/service/internal/fswatch"
)

// DefaultDebounce is Options.Debounce's default.
const DefaultDebounce = 100 * time.Millisecond

// Options configure a [Reloader]. The zero value of each field is its
// default.
type Options struct {
	// Debounce is how long the watched directories must stay quiet after a
	// change before the files are loaded again (default
	// [DefaultDebounce]). So a certificate and its key written one after
	// the other are loaded together.
	Debounce time.Duration
	// Loaded, when not nil, is called after every load that read
	// something new. New, Reload or the watcher makes such loads. After a
	// success it gets the end of the certificate's validity. After a
	// failure it gets the error. A metrics hook; it must be fast.
	Loaded func(notAfter time.Time, err error)
	// Logger receives a line for every load, and every failure (default
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock that judges a certificate's validity (default
	// time.Now).
	Now func() time.Time
}

// Listener says what one listener asks of its handshakes.
type Listener struct {
	// ClientAuth requires of every client a certificate that chains to
	// one of the CA certificates of Files.ClientCA (mutual TLS).
	ClientAuth bool
	// ClientSANs, when not empty, also requires that the client's
	// certificate names one of them as a SAN: a DNS name, a URI (a SPIFFE
	// ID), an IP address or an email address. It needs ClientAuth.
	ClientSANs []string
	// NextProtos are the application protocols offered by ALPN, in order
	// of preference ("h2" for gRPC).
	NextProtos []string
}

// Reloader holds a TLS identity loaded from files, loads it again when they
// change, and hands out [tls.Config] values that use the one loaded last.
// It is safe for concurrent use.
type Reloader struct {
	files Files
	opts  Options

	mu      sync.Mutex // serializes loads and guards configs
	id      *identity
	configs []*listenerConfig

	watcher atomic.Pointer[fswatch.Watcher] // set by Watch
}

// listenerConfig is what one Listener's handshakes use now.
type listenerConfig struct {
	l   Listener
	cur atomic.Pointer[tls.Config]
}

// New loads the files: one that does not load is its error, wrapping
// [ErrFile].
func New(files Files, opts Options) (*Reloader, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Reloader{files: files, opts: opts}
	id, err := load(files, opts.Now())
	if opts.Loaded != nil {
		opts.Loaded(notAfter(id), err)
	}
	if err != nil {
		return nil, err
	}
	r.id = id
	r.logLoaded(id, "TLS certificate loaded")
	return r, nil
}

func notAfter(id *identity) time.Time {
	if id == nil {
		return time.Time{}
	}
	return id.leaf.NotAfter
}

// TLSConfig returns a configuration for a listener: every handshake takes
// the identity loaded last. ClientAuth needs Files.ClientCA.
func (r *Reloader) TLSConfig(l Listener) (*tls.Config, error) {
	if l.ClientAuth && r.files.ClientCA == "" {
		return nil, fmt.Errorf("%w: client certificates asked for without a CA file to verify them", ErrFile)
	}
	if len(l.ClientSANs) > 0 && !l.ClientAuth {
		return nil, fmt.Errorf("%w: a client SAN allow-list without client certificates", ErrFile)
	}
	lc := &listenerConfig{l: Listener{ClientAuth: l.ClientAuth, ClientSANs: slices.Clone(l.ClientSANs), NextProtos: slices.Clone(l.NextProtos)}}
	r.mu.Lock()
	lc.cur.Store(lc.l.build(r.id))
	r.configs = append(r.configs, lc)
	r.mu.Unlock()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: lc.l.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return lc.cur.Load(), nil
		},
	}, nil
}

// build returns the configuration of l's handshakes with id.
func (l Listener) build(id *identity) *tls.Config {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{id.cert},
		NextProtos:   l.NextProtos,
	}
	if l.ClientAuth {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = id.clientCAs
	}
	if len(l.ClientSANs) > 0 {
		c.VerifyConnection = l.verifySAN
	}
	return c
}

// verifySAN refuses a client certificate that names none of l.ClientSANs.
// It runs after the chain is verified.
func (l Listener) verifySAN(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return ErrClientSAN
	}
	c := cs.PeerCertificates[0]
	names := slices.Concat(c.DNSNames, c.EmailAddresses)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	for _, n := range names {
		if slices.Contains(l.ClientSANs, n) {
			return nil
		}
	}
	return fmt.Errorf("%w: the certificate names %q", ErrClientSAN, names)
}

// Reload loads the files again and, if they load, makes them what every
// new handshake uses; files that have not changed since the last load
// change nothing. Files that do not load are logged, reported to
// Options.Loaded and returned, and the identity in use keeps serving.
// After [Reloader.Watch], it also moves the watches to where the files'
// links lead now.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.watcher.Load(); w != nil {
		if err := w.Rearm(); err != nil { // a link may have moved unseen
			r.opts.Logger.Warn("watching the TLS files", "cert", r.files.Cert, "err", err)
		}
	}
	id, err := load(r.files, r.opts.Now())
	if err != nil {
		if r.opts.Loaded != nil {
			r.opts.Loaded(time.Time{}, err)
		}
		r.opts.Logger.Error("TLS files rejected; the certificate in use keeps serving",
			"cert", r.files.Cert, "key", r.files.Key, "client_ca", r.files.ClientCA, "err", err,
			"serving_not_after", r.id.leaf.NotAfter)
		return err
	}
	if id.sum == r.id.sum {
		return nil
	}
	r.id = id
	for _, lc := range r.configs {
		lc.cur.Store(lc.l.build(id))
	}
	if r.opts.Loaded != nil {
		r.opts.Loaded(id.leaf.NotAfter, nil)
	}
	r.logLoaded(id, "TLS certificate reloaded")
	return nil
}

func (r *Reloader) logLoaded(id *identity, msg string) {
	r.opts.Logger.Info(msg, "cert", r.files.Cert, "subject", id.leaf.Subject.String(), "dns_names", id.leaf.DNSNames,
		"issuer", id.leaf.Issuer.String(), "serial", id.leaf.SerialNumber.String(),
		"not_after", id.leaf.NotAfter, "client_ca", r.files.ClientCA)
}

// NotAfter returns the end of the validity of the certificate in use.
func (r *Reloader) NotAfter() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id.leaf.NotAfter
}
