// Package xds is a rule source that is not a file. The rules arrive as
// RateLimitConfig resources (ratelimit.config.ratelimit.v3) from an xDS
// management server. They come over the aggregated discovery service,
// state of the world. envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW
// takes them from Envoy Gateway the same way.
//
// Each update is parsed as rule files are (config.FromXDS). One that
// parses is applied and acknowledged (ACK). One that does not is refused
// (NACK, with the parser's errors), and the rules in use keep serving. A
// lost server changes nothing in use. The client connects again. It waits
// between tries from Options.MinBackoff, doubling up to MaxBackoff, with
// jitter.
package xds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/redlimit/redlimit/service/internal/config"
)

// TypeURL is the type of the resources the client asks for.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Defaults of [Options].
const (
	DefaultNodeID     = "default"
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// ErrOptions reports Options that cannot work.
var ErrOptions = errors.New("xds: invalid options")

// Options configure a [Client]. The zero value of each field is its
// default, but ServerURL and Apply are required.
type Options struct {
	// ServerURL is the xDS server's address, host:port or any gRPC target
	// (CONFIG_GRPC_XDS_SERVER_URL).
	ServerURL string
	// NodeID names this client to the server, which keys its snapshots by
	// it (default [DefaultNodeID]; CONFIG_GRPC_XDS_NODE_ID).
	NodeID string
	// NodeMetadata is the node's metadata, string values
	// (CONFIG_GRPC_XDS_NODE_METADATA).
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata on every stream
	// (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
	Headers map[string]string
	// TLS, when not nil, secures the connection ([TLSConfig] makes one);
	// nil connects in plaintext.
	TLS *tls.Config
	// Loader parses the resources (config.Loader.FromXDS): its
	// MergeDomains and DefaultAlgorithm apply.
	Loader config.Loader
	// MinBackoff and MaxBackoff bound the wait before connecting again
	// (defaults [DefaultMinBackoff], [DefaultMaxBackoff]).
	MinBackoff, MaxBackoff time.Duration
	// MaxMessageBytes caps a response (default: gRPC's, 4 MiB).
	MaxMessageBytes int
	// Apply puts a configuration in service. It is called from Run's
	// goroutine, once per update accepted.
	Apply func(*config.Config)
	// Rejected, when not nil, is told of each update refused.
	Rejected func(error)
	// Logger receives the client's logs (default slog.Default()).
	Logger *slog.Logger
}

// Client takes the rules from an xDS server. Make one with [New], then
// [Client.Run] it.
type Client struct {
	opts Options
	conn *grpc.ClientConn
	node *corepb.Node
}

// New returns a client of opts.ServerURL. It connects only in Run.
func New(opts Options) (*Client, error) {
	if opts.ServerURL == "" {
		return nil, fmt.Errorf("%w: no ServerURL", ErrOptions)
	}
	if opts.Apply == nil {
		return nil, fmt.Errorf("%w: no Apply", ErrOptions)
	}
	if opts.MinBackoff < 0 || opts.MaxBackoff < 0 || opts.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("%w: negative backoff or message cap", ErrOptions)
	}
	if opts.NodeID == "" {
		opts.NodeID = DefaultNodeID
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.MaxBackoff < opts.MinBackoff {
		return nil, fmt.Errorf("%w: MaxBackoff %s below MinBackoff %s", ErrOptions, opts.MaxBackoff, opts.MinBackoff)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if opts.MaxMessageBytes > 0 {
		dial = append(dial, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxMessageBytes)))
	}
	conn, err := grpc.NewClient(opts.ServerURL, dial...)
	if err != nil {
		return nil, fmt.Errorf("%w: ServerURL %q: %w", ErrOptions, opts.ServerURL, err)
	}
	md := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range opts.NodeMetadata {
		md.Fields[k] = structpb.NewStringValue(v)
	}
	return &Client{opts: opts, conn: conn, node: &corepb.Node{Id: opts.NodeID, Metadata: md}}, nil
}

// Run takes updates until ctx is done, connecting again whenever the
// stream ends, and then closes the client. It returns nil.
func (c *Client) Run(ctx context.Context) error {
	defer c.conn.Close()
	if len(c.opts.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.opts.Headers))
	}
	wait := c.opts.MinBackoff
	for {
		got, err := c.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			wait = c.opts.MinBackoff
		}
		d := wait/2 + rand.N(wait/2+1) // jitter: half to all of wait
		c.opts.Logger.Warn("xds: stream to the server ended; the rules in use keep serving", "server", c.opts.ServerURL, "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		wait = min(2*wait, c.opts.MaxBackoff)
	}
}

// stream runs one stream until it fails; it reports whether it received
// a response.
func (c *Client) stream(ctx context.Context) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := discoverypb.NewAggregatedDiscoveryServiceClient(c.conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	acked := ""   // the version in use, for this stream's requests
	refused := "" // the version last refused
	if err := s.Send(&discoverypb.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL}); err != nil {
		return false, err
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return got, err
		}
		got = true
		req := &discoverypb.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL, ResponseNonce: resp.GetNonce(), VersionInfo: acked}
		if cfg, err := decode(resp, c.opts.Loader); err != nil {
			if resp.GetVersionInfo() != refused {
				c.opts.Logger.Error("xds: update refused (NACK); the rules in use keep serving", "version", resp.GetVersionInfo(), "err", err)
				if c.opts.Rejected != nil {
					c.opts.Rejected(err)
				}
			}
			req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			// A server may send a refused version again at once (a
			// snapshot cache does): a repeated NACK waits MinBackoff.
			if resp.GetVersionInfo() == refused {
				select {
				case <-ctx.Done():
					return got, ctx.Err()
				case <-time.After(c.opts.MinBackoff):
				}
			}
			refused = resp.GetVersionInfo()
		} else {
			refused = ""
			c.opts.Apply(cfg)
			acked = resp.GetVersionInfo()
			req.VersionInfo = acked
			c.opts.Logger.Info("xds: update applied (ACK)", "version", acked, "resources", len(resp.GetResources()))
		}
		if err := s.Send(req); err != nil {
			return got, err
		}
	}
}

// decode returns the configuration of a response's resources.
func decode(resp *discoverypb.DiscoveryResponse, l config.Loader) (*config.Config, error) {
	if t := resp.GetTypeUrl(); t != TypeURL {
		return nil, fmt.Errorf("xds: response of type %q, want %q", t, TypeURL)
	}
	res := make([]*rlsconf.RateLimitConfig, 0, len(resp.GetResources()))
	for i, a := range resp.GetResources() {
		r := &rlsconf.RateLimitConfig{}
		if err := a.UnmarshalTo(r); err != nil {
			return nil, fmt.Errorf("xds: resource %d: %w: %w", i, config.ErrInvalid, err)
		}
		res = append(res, r)
	}
	return l.FromXDS(res)
}

// TLSConfig returns the TLS of a connection to an xDS server. It trusts
// the CAs of caFile (empty: the system's). It uses the client certificate
// of certFile and keyFile if set. It checks the server's name against
// serverName if set. The variables are CONFIG_GRPC_XDS_SERVER_TLS_CACERT,
// CONFIG_GRPC_XDS_CLIENT_TLS_CERT and _KEY, and
// CONFIG_GRPC_XDS_SERVER_TLS_SAN.
func TLSConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("xds: CA: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrOptions, caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and its key", ErrOptions)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("xds: client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
