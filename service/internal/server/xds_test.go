package server

import (
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/redlimit/redlimit/service/internal/xds/xdstest"
)

// TestXDSConfigSource checks a server whose rules come from an xDS server:
// not ready before the first update, then deciding by it; an update applies
// within seconds; a bad one is NACKed while the last good rules serve; a
// lost xDS server keeps them, and its return brings its update.
func TestXDSConfigSource(t *testing.T) {
	t.Parallel()
	const node = "rl-node"
	cp := xdstest.Start(t, "127.0.0.1:0")
	srv, err := New(t.Context(), Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		XDS: XDSOptions{ServerURL: cp.Addr, NodeID: node, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := New(t.Context(), Options{ConfigPath: "rules.yaml", XDS: XDSOptions{ServerURL: cp.Addr}}); err == nil {
		t.Error("a rule file and an xDS server together: no error")
	}

	r := startNotReady(t, Options{XDS: XDSOptions{ServerURL: cp.Addr, NodeID: node, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	time.Sleep(100 * time.Millisecond)
	if code := r.get(t, "/readyz"); code == 200 {
		t.Fatal("ready before any rules arrived")
	}
	cp.Set(t, node, "1", xdstest.Rules("gw", "web", "ip", 2))
	waitFor(t, "ready with the rules of version 1", func() bool { return r.get(t, "/readyz") == 200 })
	codes := func(n int, kv ...string) (denied int) {
		for range n {
			if r.decide(t, kv...).OverallCode == pb.RateLimitResponse_OVER_LIMIT {
				denied++
			}
		}
		return denied
	}
	if d := codes(3, "ip", "1.1.1.1"); d != 1 {
		t.Fatalf("version 1, 2 a minute: %d of 3 denied, want 1", d)
	}

	bad := xdstest.Rules("gw", "web", "user", 1)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	cp.Set(t, node, "2", bad)
	waitFor(t, "version 2 NACKed", func() bool { _, n := cp.Nacks("unit"); return n > 0 })
	if d := codes(1, "ip", "1.1.1.1"); d != 1 {
		t.Fatal("after a bad update, the last good rules no longer serve")
	}
	waitFor(t, "the refusal counted", func() bool { return r.metric(t, `redlimit_config_reloads_total{result="failure"}`) >= 1 })

	cp.Set(t, node, "3", xdstest.Rules("gw", "web", "user", 1))
	waitFor(t, "version 3 applied", func() bool { return r.decide(t, "user", "u1").OverallCode == pb.RateLimitResponse_OVER_LIMIT })

	cp.Stop()
	time.Sleep(200 * time.Millisecond)
	if d := codes(1, "user", "u1"); d != 1 {
		t.Fatal("with the xDS server lost, the last good rules no longer serve")
	}
	if code := r.get(t, "/readyz"); code != 200 {
		t.Fatalf("with the xDS server lost and rules in use: /readyz %d, want 200", code)
	}
	cp2 := xdstest.Start(t, cp.Addr)
	cp2.Set(t, node, "4", xdstest.Rules("gw", "web", "path", 1))
	waitFor(t, "version 4 applied after reconnecting", func() bool {
		return r.decide(t, "path", "/").OverallCode == pb.RateLimitResponse_OVER_LIMIT
	})
}
