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
	"strings"

	"github.com/redis/rueidis"
)

// ErrConnect reports that [Open] could not reach or use the Redis it was
// given. The wrapped error names the cause (refused, authentication, TLS).
var ErrConnect = errors.New("redisstore: cannot use Redis")

// Open connects to the Redis named by rawURL with a rueidis client that
// the Store owns; [Store.Close] closes it. It checks that Redis answers
// and runs scripts, and returns the Store. Errors wrap [ErrConnect] and
// name the problem.
//
// The URL is rueidis's (see [rueidis.ParseURL]), plus "ca_file":
//
//	redis://[user[:password]@]host[:port][/db]      standalone, or Cluster (detected)
//	redis://host:7000?addr=host:7001&addr=host:7002  several seed addresses (Cluster)
//	redis://host:26379?addr=host2:26379&master_set=mymaster  Sentinel: the sentinels and the master's name
//	rediss://host:6380?ca_file=/etc/redis/ca.pem    TLS with a custom CA (skip_verify=true to not verify)
//
// The parameters:
//   - user and password: the ACL user and password. Only a password:
//     AUTH with requirepass;
//   - db: the database (not on Cluster);
//   - dial_timeout: the connect timeout;
//   - write_timeout: how long a connection (to Redis or to a sentinel)
//     may leave a PING unanswered before it is closed.
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
// for callers who build the client themselves, or check a URL. Its errors
// never hold the password (see [Redacted]).
func ParseURL(rawURL string) (rueidis.ClientOption, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return rueidis.ClientOption{}, err
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
	if copt.Sentinel.MasterSet != "" {
		// rueidis dials the sentinels with Sentinel.Dialer. Its zero value
		// has no keep-alive. The client hears on that connection that the
		// master moved, and it is then never PINGed. A sentinel that hangs
		// with it open (a stopped process) keeps the client on a dead
		// master for as long as it hangs. With the master's dialer, a
		// second of silence sends a PING. A PING unanswered within
		// write_timeout (10 s by default) closes the connection. The client then turns to
		// another sentinel.
		copt.Sentinel.Dialer = copt.Dialer
		if copt.Sentinel.Dialer.KeepAlive == 0 {
			copt.Sentinel.Dialer.KeepAlive = rueidis.DefaultTCPKeepAlive
		}
	}
	// Decisions never read through the client-side cache.
	copt.DisableCache = true
	return copt, nil
}

// passwordHint is the advice of an error about a URL whose password does
// not fit in it as written.
const passwordHint = "percent-encode the password's reserved characters (% as %25, / as %2F, # as %23, ? as %3F, @ as %40, : as %3A, space as %20)"

// parseURL parses rawURL and checks that all of its user information is
// where url.Parse found it. So no part of a password is taken for the
// port, the path, the query or the fragment. Its errors wrap ErrConnect
// and never hold the password; url.Parse's quote the URL whole.
func parseURL(rawURL string) (*url.URL, error) {
	where := Redacted(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		// Parse the URL with its password redacted: if that parses, the
		// password was the problem; otherwise its error is about the rest.
		if _, rerr := url.Parse(where); rerr != nil {
			var uerr *url.Error
			if errors.As(rerr, &uerr) {
				rerr = uerr.Err
			}
			return nil, fmt.Errorf("%w: bad URL %s: %v", ErrConnect, where, rerr)
		}
		return nil, fmt.Errorf("%w: bad URL %s: the password does not parse: %s", ErrConnect, where, passwordHint)
	}
	if u.Opaque != "" && !strings.Contains(rawURL, "@") {
		return nil, fmt.Errorf("%w: bad URL %s: no // after the scheme: write scheme://host:port", ErrConnect, where)
	}
	if u.Opaque != "" || strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") || u.User == nil && strings.Contains(rawURL, "@") {
		return nil, fmt.Errorf("%w: bad URL %s: an @ outside the user information: write scheme://user:password@host:port, and %s", ErrConnect, where, passwordHint)
	}
	// u.Query silently drops the pairs that do not parse. rueidis reads an
	// unbracketed IPv6 address as a host with no port: "::1:6379" dials
	// [::1:6379]:6379. Refuse both, rather than connect somewhere else
	// than the URL says.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: bad URL %s: the query does not parse (percent-encode %% as %%25): %v", ErrConnect, where, err)
	}
	if u.Scheme != "unix" {
		for _, h := range append([]string{u.Host}, q["addr"]...) {
			if !strings.HasPrefix(h, "[") && strings.Count(h, ":") > 1 {
				return nil, fmt.Errorf("%w: bad URL %s: address %q: write an IPv6 address in brackets, as [::1]:6379", ErrConnect, where, h)
			}
		}
	}
	return u, nil
}

// Redacted returns rawURL with any password replaced by "xxxxx", for logs
// and errors. It works on the text, not on a parsed URL. So it hides the
// password of a URL that does not parse. It also hides one that parses
// with part of the password taken for the port or the path. The password
// is what comes before the last "@" and after the first ":" that follows
// the scheme's "//". Without "//", it is everything after the scheme's
// ":", or all of it. It may hide more than the password of a URL whose
// query holds an "@"; never less.
func Redacted(rawURL string) string {
	at := strings.LastIndexByte(rawURL, '@')
	if at < 0 {
		return rawURL
	}
	head := rawURL[:at]
	if i := strings.Index(head, "://"); i >= 0 {
		c := strings.IndexByte(head[i+3:], ':')
		if c < 0 {
			return rawURL // a user name, no password
		}
		return head[:i+3+c+1] + "xxxxx" + rawURL[at:]
	}
	if c := strings.IndexByte(head, ':'); c >= 0 {
		return head[:c+1] + "xxxxx" + rawURL[at:]
	}
	return "xxxxx" + rawURL[at:]
}

// Ping checks that Redis answers and can run the decision script: it peeks
// at a key no caller uses.
func (s *Store) Ping(ctx context.Context) error {
	r := pingRequest
	w := s.newWire()
	w.one(kindPeek, s.key(hashTag(r.Key), r.Limit), r)
	rep, err := s.call(ctx, "ping", &w)
	if err != nil {
		return err
	}
	rep.decisions(1, func(int, bool, int64, int64, int64) {})
	if !rep.ok() {
		return badReply("ping", rep)
	}
	return nil
}

// Close waits for the refunds [Store.AllowAll] left running, at most 1 s.
// It ends the goroutines the Store keeps to send batches. Then it
// closes the client if the Store opened it ([Open]). The caller closes a
// client it gave, after Close.
func (s *Store) Close() error {
	s.bg.Wait()
	s.runners.Close()
	if s.close != nil {
		s.close()
	}
	return nil
}
