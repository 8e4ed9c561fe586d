package server

import (
	"fmt"
	"time"

	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/xds"
)

// XDSOptions name an xDS server the rules come from, in place of a rule
// file (package xds; envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW).
// Set, the server is not ready until the first update applies; an update
// refused, or the xDS server lost, leaves the rules in use serving.
type XDSOptions struct {
	// ServerURL is the xDS server's address (CONFIG_GRPC_XDS_SERVER_URL);
	// empty, the rules come from Options.ConfigPath.
	ServerURL string
	// NodeID and NodeMetadata name this instance to the xDS server
	// (CONFIG_GRPC_XDS_NODE_ID, CONFIG_GRPC_XDS_NODE_METADATA; default
	// node ID xds.DefaultNodeID).
	NodeID       string
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata
	// (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
	Headers map[string]string
	// TLS connects over TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS). It trusts
	// CAFile's CAs (default: the system's). It uses the client certificate
	// of CertFile and KeyFile if set. It checks the server's name against
	// ServerName if set. The variables are
	// CONFIG_GRPC_XDS_SERVER_TLS_CACERT, CONFIG_GRPC_XDS_CLIENT_TLS_CERT and
	// _KEY, and CONFIG_GRPC_XDS_SERVER_TLS_SAN.
	TLS                                   bool
	CAFile, CertFile, KeyFile, ServerName string
	// MinBackoff and MaxBackoff bound the wait before connecting again
	// (defaults xds.DefaultMinBackoff and xds.DefaultMaxBackoff;
	// XDS_CLIENT_BACKOFF_INITIAL_INTERVAL, XDS_CLIENT_BACKOFF_MAX_INTERVAL).
	MinBackoff, MaxBackoff time.Duration
	// MaxMessageBytes caps an update (default gRPC's, 4 MiB;
	// XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES).
	MaxMessageBytes int
}

// newXDS makes the xDS client of Options.XDS.
func (s *Server) newXDS() error {
	o := s.opts.XDS
	if s.opts.ConfigPath != "" {
		return fmt.Errorf("%w: both a rule file (%s) and an xDS server (%s): the rules come from one", ErrOptions, s.opts.ConfigPath, o.ServerURL)
	}
	xo := xds.Options{
		ServerURL: o.ServerURL, NodeID: o.NodeID, NodeMetadata: o.NodeMetadata, Headers: o.Headers,
		Loader: config.Loader{MergeDomains: s.opts.MergeDomains, DefaultAlgorithm: s.opts.DefaultAlgorithm}, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff,
		MaxMessageBytes: o.MaxMessageBytes, Logger: s.log,
		Apply:    s.setConfig,
		Rejected: func(error) { s.metrics.ReloadFailed() },
	}
	if o.TLS {
		t, err := xds.TLSConfig(o.CAFile, o.CertFile, o.KeyFile, o.ServerName)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		xo.TLS = t
	}
	c, err := xds.New(xo)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.xds = c
	return nil
}

// configSource names where the rules come from, for the logs.
func (s *Server) configSource() string {
	if s.xds != nil {
		return "xds:" + s.opts.XDS.ServerURL
	}
	return s.opts.ConfigPath
}
