package bench

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redlimit/redlimit/internal/redistest"
)

// One redis-server is started lazily, the first time a benchmark needs it,
// and shared by every benchmark of the run; TestMain stops it. Memory-only
// runs never start one.
var (
	serverOnce sync.Once
	server     *redistest.Server
	serverErr  error
)

func redisServer(b *testing.B) *redistest.Server {
	b.Helper()
	serverOnce.Do(func() { server, serverErr = redistest.StartServer() })
	if serverErr != nil {
		b.Fatalf("starting redis-server: %v", serverErr)
	}
	return server
}

// flush empties the shared server so every case starts from the same state.
func flush(b *testing.B, s *redistest.Server) {
	b.Helper()
	if _, err := s.Do("FLUSHALL"); err != nil {
		b.Fatalf("FLUSHALL: %v", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	if cluster != nil {
		cluster.Stop()
	}
	os.Exit(code)
}

// makeKeys returns n distinct identifiers, built before any timer starts.
func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	return keys
}

// cursor walks keys round-robin without allocating. Each goroutine of a
// RunParallel has its own, starting at a different place.
type cursor struct{ i, n int }

var cursorSeq atomic.Uint64

func newCursor(n int) cursor {
	return cursor{i: int(cursorSeq.Add(1)*7919) % n, n: n}
}

func (c *cursor) next() int {
	i := c.i
	if c.i++; c.i == c.n {
		c.i = 0
	}
	return i
}
