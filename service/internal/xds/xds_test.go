package xds

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/xds/xdstest"
)

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
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set(t, node, "1", xdstest.Rules("gw", "web", "ip", 10))

	got := &applied{}
	c, err := New(Options{ServerURL: cp.Addr, NodeID: node, NodeMetadata: map[string]string{"cluster": "a"},
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
	waitFor(t, "version 1 ACKed", func() bool { return cp.Acked("1") })

	// A bad update: NACKed with the parser's error, nothing applied.
	bad := xdstest.Rules("gw", "web", "ip", 10)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	cp.Set(t, node, "2", bad)
	waitFor(t, "version 2 NACKed", func() bool { _, n := cp.Nacks("unit"); return n > 0 })
	if n := got.count(); n != 1 {
		t.Fatalf("%d configurations applied, want 1: the bad one was applied", n)
	}

	// The server sends the refused version again at every NACK: the
	// client paces its NACKs rather than spin.
	time.Sleep(300 * time.Millisecond)
	if n, _ := cp.Nacks(""); n > 20 {
		t.Errorf("%d NACKs in 300 ms with a backoff of 20 ms: the client spins", n)
	}

	cp.Set(t, node, "3", xdstest.Rules("gw", "web", "ip", 20), xdstest.Rules("gw2", "api", "user", 5))
	waitFor(t, "version 3 applied", func() bool { return got.last() == "api.user 5/1m sliding_window;web.ip 20/1m sliding_window;" })

	// The server goes: the rules stay; it comes back: the client
	// connects again and takes its update.
	cp.Stop()
	before := got.count()
	time.Sleep(200 * time.Millisecond)
	if got.count() != before {
		t.Fatalf("configurations applied while the server was away")
	}
	cp2 := xdstest.Start(t, cp.Addr)
	cp2.Set(t, node, "4", xdstest.Rules("gw", "web", "path", 7))
	waitFor(t, "version 4 applied after reconnecting", func() bool { return got.last() == "web.path 7/1m sliding_window;" })
	waitFor(t, "version 4 ACKed", func() bool { return cp2.Acked("4") })
	n := cp2.Requests()[0].GetNode()
	if n.GetId() != node || n.GetMetadata().GetFields()["cluster"].GetStringValue() != "a" {
		t.Errorf("node %v, want id %s and metadata cluster=a", n, node)
	}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
