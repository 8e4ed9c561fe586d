// Package xdstest runs an xDS management server for tests:
// go-control-plane's server and snapshot cache on a port of 127.0.0.1,
// serving RateLimitConfig resources over ADS and recording every request.
package xdstest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server is a running xDS server. Stop it to see a client lose it.
type Server struct {
	Addr  string
	Cache cachev3.SnapshotCache
	grpc  *grpc.Server

	mu   sync.Mutex
	reqs []*discoverypb.DiscoveryRequest
}

// Start starts a server on addr ("127.0.0.1:0" for a free port) with an
// empty snapshot cache and the gRPC options opts (grpc.Creds for TLS),
// stopped when the test ends.
func Start(t testing.TB, addr string, opts ...grpc.ServerOption) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), Cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil), grpc: grpc.NewServer(opts...)}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverypb.DiscoveryRequest) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reqs = append(s.reqs, r)
		return nil
	}}
	discoverypb.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(context.Background(), s.Cache, cb))
	go s.grpc.Serve(ln)
	t.Cleanup(s.grpc.Stop)
	return s
}

// Stop stops the server, cutting its streams.
func (s *Server) Stop() { s.grpc.Stop() }

// Set makes res the resources of node at version.
func (s *Server) Set(t testing.TB, node, version string, res ...*rlsconf.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(res))
	for i, r := range res {
		rs[i] = r
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// Acked reports whether a client acknowledged version.
func (s *Server) Acked(version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if r.GetResponseNonce() != "" && r.GetErrorDetail() == nil && r.GetVersionInfo() == version {
			return true
		}
	}
	return false
}

// Nacks returns how many NACKs the server received, and how many of them
// hold what in their message.
func (s *Server) Nacks(what string) (all, with int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if d := r.GetErrorDetail(); d != nil {
			all++
			if strings.Contains(d.GetMessage(), what) {
				with++
			}
		}
	}
	return all, with
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*discoverypb.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoverypb.DiscoveryRequest(nil), s.reqs...)
}

// Rules returns a RateLimitConfig named name of domain, limiting key to n
// a minute.
func Rules(name, domain, key string, n uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: key, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: n}},
	}}
}
