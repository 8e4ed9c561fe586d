package xds

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/redlimit/redlimit/service/internal/config"
)

// controlPlane is an xDS server of go-control-plane with a snapshot cache,
// on a port of 127.0.0.1, recording the requests it receives.
type controlPlane struct {
	cache cachev3.SnapshotCache
	grpc  *grpc.Server
	addr  string

	mu   sync.Mutex
	reqs []*discoverypb.DiscoveryRequest
}

func startControlPlane(t *testing.T, addr string, snap cachev3.SnapshotCache) *controlPlane {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{cache: snap, grpc: grpc.NewServer(), addr: ln.Addr().String()}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverypb.DiscoveryRequest) error {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.reqs = append(cp.reqs, r)
		return nil
	}}
	srv := serverv3.NewServer(context.Background(), snap, cb)
	discoverypb.RegisterAggregatedDiscoveryServiceServer(cp.grpc, srv)
	go cp.grpc.Serve(ln)
	t.Cleanup(cp.grpc.Stop)
	return cp
}

// answered reports whether the client answered version with an ACK, or
// with a NACK if nack, whose message holds what.
func (cp *controlPlane) answered(nack bool, version, what string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, r := range cp.reqs {
		if r.GetResponseNonce() == "" {
			continue
		}
		switch {
		case nack && r.GetErrorDetail() != nil && strings.Contains(r.GetErrorDetail().GetMessage(), what):
			return true
		case !nack && r.GetErrorDetail() == nil && r.GetVersionInfo() == version:
			return true
		}
	}
	return false
}

// nacks returns how many NACKs the server received.
func (cp *controlPlane) nacks() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	n := 0
	for _, r := range cp.reqs {
		if r.GetErrorDetail() != nil {
			n++
		}
	}
	return n
}

func setSnapshot(t *testing.T, c cachev3.SnapshotCache, node, version string, res ...*rlsconf.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(res))
	for i, r := range res {
		rs[i] = r
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// rules returns a RateLimitConfig of domain web limiting key to n a minute.
func rules(name, key string, n uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: name, Domain: "web", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: key, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: n}},
	}}
}

// applied keeps the configurations a client applied.
type applied struct {
	mu   sync.Mutex
	cfgs []*config.Config
}

func (a *applied) apply(c *config.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfgs = append(a.cfgs, c)
}

// last returns the summary of the last configuration applied: its rule
// paths and limits.
func (a *applied) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cfgs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, r := range a.cfgs[len(a.cfgs)-1].Rules() {
		b.WriteString(r.Path + " " + r.Limit.String() + ";")
	}
	return b.String()
}

func (a *applied) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cfgs)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClient checks the xDS config source against go-control-plane's
// server: updates apply within seconds, a bad update is NACKed and the
// rules in use stay, a lost server keeps them and is connected again.
func TestClient(t *testing.T) {
	t.Parallel()
	const node = "redlimit-test"
	snap := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	cp := startControlPlane(t, "127.0.0.1:0", snap)
	setSnapshot(t, snap, node, "1", rules("gw", "ip", 10))

	got := &applied{}
	c, err := New(Options{ServerURL: cp.addr, NodeID: node, NodeMetadata: map[string]string{"cluster": "a"},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Apply: got.apply,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	waitFor(t, "version 1 applied", func() bool { return got.last() == "web.ip 10/1m sliding_window;" })
	waitFor(t, "version 1 ACKed", func() bool { return cp.answered(false, "1", "") })

	// A bad update: NACKed with the parser's error, nothing applied.
	bad := rules("gw", "ip", 10)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	setSnapshot(t, snap, node, "2", bad)
	waitFor(t, "version 2 NACKed", func() bool { return cp.answered(true, "", "unit") })
	if n := got.count(); n != 1 {
		t.Fatalf("%d configurations applied, want 1: the bad one was applied", n)
	}

	// The server sends the refused version again at every NACK: the
	// client paces its NACKs rather than spin.
	time.Sleep(300 * time.Millisecond)
	if n := cp.nacks(); n > 20 {
		t.Errorf("%d NACKs in 300 ms with a backoff of 20 ms: the client spins", n)
	}

	api := rules("gw2", "user", 5)
	api.Domain = "api"
	setSnapshot(t, snap, node, "3", rules("gw", "ip", 20), api)
	waitFor(t, "version 3 applied", func() bool { return got.last() == "api.user 5/1m sliding_window;web.ip 20/1m sliding_window;" })

	// The server goes: the rules stay; it comes back: the client
	// connects again and takes its update.
	cp.grpc.Stop()
	before := got.count()
	time.Sleep(200 * time.Millisecond)
	if got.count() != before {
		t.Fatalf("configurations applied while the server was away")
	}
	snap2 := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	setSnapshot(t, snap2, node, "4", rules("gw", "path", 7))
	cp2 := startControlPlane(t, cp.addr, snap2)
	waitFor(t, "version 4 applied after reconnecting", func() bool { return got.last() == "web.path 7/1m sliding_window;" })
	waitFor(t, "version 4 ACKed", func() bool { return cp2.answered(false, "4", "") })
	cp2.mu.Lock()
	n := cp2.reqs[0].GetNode()
	cp2.mu.Unlock()
	if n.GetId() != node || n.GetMetadata().GetFields()["cluster"].GetStringValue() != "a" {
		t.Errorf("node %v, want id %s and metadata cluster=a", n, node)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(strings.TrimSpace(string(p))); return len(p), nil }
