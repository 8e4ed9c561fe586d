package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/redis/rueidis"
)

// ErrConnect reports that [Open] could not reach or use the Redis it was
// given. The wrapped error names the cause (refused, authentication, TLS).
var ErrConnect = errors.New("redisstore: cannot use Redis")

// Open connects to the Redis named by rawURL with a rueidis client that the
// Store owns ([Store.Close] closes it), checks that Redis answers and runs
// scripts, and returns the Store. Errors wrap [ErrConnect] and name the
// problem.
//
// The URL is rueidis's (see [rueidis.ParseURL]), plus "ca_file":
//
//	redis://[user[:password]@]host[:port][/db]      standalone, or Cluster (detected)
//	redis://host:7000?addr=host:7001&addr=host:7002  several seed addresses (Cluster)
//	redis://host:26379?master_set=mymaster          Sentinel: the sentinels and the master's name
//	rediss://host:6380?ca_file=/etc/redis/ca.pem    TLS with a custom CA (skip_verify=true to not verify)
//
// user and password are the ACL user and password (only a password: AUTH
// with requirepass); db selects a database (not on Cluster); dial_timeout
// sets the connect timeout.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	copt, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	where := Redacted(rawURL)
	c, err := rueidis.NewClient(copt)
	if err != nil {
		var nerr net.Error
		if copt.TLSConfig != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout()) {
			return nil, fmt.Errorf("%w at %s: no TLS handshake within the dial timeout (does this port serve TLS?): %w", ErrConnect, where, err)
		}
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, where, err)
	}
	s, err := New(c, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.close = c.Close
	if err := s.Ping(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w at %s: %w", ErrConnect, where, err)
	}
	return s, nil
}

// ParseURL turns a connection URL, as [Open] takes it, into rueidis options,
// for callers who build the client themselves.
func ParseURL(rawURL string) (rueidis.ClientOption, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("%w: bad URL: %w", ErrConnect, err)
	}
	q := u.Query()
	caFile := q.Get("ca_file")
	q.Del("ca_file")
	u.RawQuery = q.Encode()
	copt, err := rueidis.ParseURL(u.String())
	if err != nil {
		return copt, fmt.Errorf("%w: %s: %w", ErrConnect, Redacted(rawURL), err)
	}
	if caFile != "" {
		if copt.TLSConfig == nil {
			return copt, fmt.Errorf("%w: ca_file needs a rediss:// URL", ErrConnect)
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return copt, fmt.Errorf("%w: ca_file: %w", ErrConnect, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return copt, fmt.Errorf("%w: ca_file %s holds no PEM certificate", ErrConnect, caFile)
		}
		copt.TLSConfig.RootCAs = pool
	}
	if copt.TLSConfig != nil && copt.TLSConfig.MinVersion == 0 {
		copt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	// Decisions never read through the client-side cache.
	copt.DisableCache = true
	return copt, nil
}

// Redacted returns rawURL with any password replaced by "xxxxx", for logs
// and errors.
func Redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Ping checks that Redis answers and can run the decision script: it peeks
// at a key no caller uses.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.run(ctx, opPeek, pingRequest, "")
	return err
}

// Close closes the client if the Store opened it ([Open]); otherwise it does
// nothing, and the caller closes its own client.
func (s *Store) Close() error {
	if s.close != nil {
		s.close()
	}
	return nil
}
