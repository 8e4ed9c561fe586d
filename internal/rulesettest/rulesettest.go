// Package rulesettest holds the test helpers that the tests of httplimit,
// grpclimit and ruleset share: the two stores they run against, a clock
// that stands still, and a logger whose output they can read. Only tests
// import it.
package rulesettest

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

// Stores are a memory store and a Redis store to run the same test against.
type Stores struct {
	Memory *memory.Store
	Redis  *redisstore.Store
	Server *redistest.Server // the Redis server: redistest.Shared
	Prefix string            // the Redis store's key prefix, of this test's own
	now    func() time.Time
}

// NewStores returns a memory store and a Redis store on the shared server.
// Their key prefix starts with pkg and is this test's own. Both read now,
// or the real clock if now is nil. They are closed when t ends. The test
// binary's TestMain must call redistest.Main.
func NewStores(t testing.TB, pkg string, now func() time.Time) Stores {
	t.Helper()
	var mopts []memory.Option
	var ropts []redisstore.Option
	if now != nil {
		mopts = append(mopts, memory.WithClock(now))
		ropts = append(ropts, redisstore.WithClock(now))
	}
	mem, err := memory.New(mopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })

	srv := redistest.Shared(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis client: %v", err)
	}
	t.Cleanup(c.Close)
	prefix := fmt.Sprintf("%s-t%x:", pkg, rand.Uint64())
	rs, err := redisstore.New(c, append(ropts, redisstore.WithPrefix(prefix))...)
	if err != nil {
		t.Fatal(err)
	}
	return Stores{Memory: mem, Redis: rs, Server: srv, Prefix: prefix, now: now}
}

// RedisClients returns n more Redis stores on s's server and prefix, each
// with a client of its own, as n processes sharing s.Redis's keys.
func (s Stores) RedisClients(t testing.TB, n int) []*redisstore.Store {
	t.Helper()
	opts := []redisstore.Option{redisstore.WithPrefix(s.Prefix)}
	if s.now != nil {
		opts = append(opts, redisstore.WithClock(s.now))
	}
	out := make([]*redisstore.Store, n)
	for i := range out {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Server.Addr()}, DisableCache: true})
		if err != nil {
			t.Fatalf("rueidis client: %v", err)
		}
		t.Cleanup(c.Close)
		if out[i], err = redisstore.New(c, opts...); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Plans are the tiers of the per-request tests: a plan chooses a limit.
var Plans = map[string]redlimit.Limit{
	"free": redlimit.PerMinute(100),
	"pro":  redlimit.PerMinute(10_000),
}

// FixedNow returns a clock that stands still at the current second: limits
// in the tests that use it are long enough that nothing expires meanwhile.
func FixedNow() func() time.Time {
	t0 := time.Now().Truncate(time.Second)
	return func() time.Time { return t0 }
}

// LogBuffer is a slog handler's output, safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// NewLogger returns a logger of every level, in text, and its output.
func NewLogger() (*slog.Logger, *LogBuffer) {
	var buf LogBuffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}
