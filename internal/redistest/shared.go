package redistest

import (
	"os"
	"sync"
	"testing"
)

var shared struct {
	mu     sync.Mutex
	srv    *Server
	srvErr error
	cl     *Cluster
	clErr  error
}

// Shared returns a standalone server started lazily once per test binary
// and reused by every test in it. Tests must not stop, kill, pause or
// flush it; they should use unique key prefixes so they can run in
// parallel. Use Main in TestMain to stop it at the end.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.srvErr == nil {
		shared.srv, shared.srvErr = StartServer()
	}
	if shared.srvErr != nil {
		tb.Fatalf("shared server: %v", shared.srvErr)
	}
	if !shared.srv.Running() {
		if err := shared.srv.Restart(); err != nil {
			tb.Fatalf("shared server died and could not be restarted: %v", err)
		}
	}
	return shared.srv
}

// SharedCluster returns a cluster of 3 masters and 3 replicas started
// lazily once per test binary and reused by every test in it. Tests must
// not disturb its nodes and should use unique key prefixes. Use Main in
// TestMain to stop it at the end.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cl == nil && shared.clErr == nil {
		shared.cl, shared.clErr = NewCluster(ClusterOptions{Masters: 3, ReplicasPerMaster: 1})
	}
	if shared.clErr != nil {
		tb.Fatalf("shared cluster: %v", shared.clErr)
	}
	return shared.cl
}

// Main runs the tests and then stops the shared servers, and exits with
// the tests' status. Use it as
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}

func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.cl != nil {
		shared.cl.Stop()
	}
}
