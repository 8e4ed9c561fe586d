package reserve_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/reserve"
	"github.com/redlimit/redlimit/resilient"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// t0 is an instant at the start of a window of every period the tests use.
var t0 = time.Now().Truncate(24 * time.Hour)

// backend makes a Refunder on a clock; several calls of one backend in a
// test share their state (one Redis), unless it is the memory store.
type backend struct {
	name   string
	shared bool // the stores it makes share state
	make   func(t *testing.T, prefix string, now func() time.Time) redlimit.Refunder
}

var backends = []backend{
	{"memory", false, func(t *testing.T, _ string, now func() time.Time) redlimit.Refunder {
		s, err := memory.New(memory.WithClock(now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"redis", true, func(t *testing.T, prefix string, now func() time.Time) redlimit.Refunder {
		return redisStore(t, []string{redistest.Shared(t).Addr()}, prefix, now)
	}},
	{"cluster", true, func(t *testing.T, prefix string, now func() time.Time) redlimit.Refunder {
		return redisStore(t, redistest.SharedCluster(t).Addrs(), prefix, now)
	}},
	{"resilient", true, func(t *testing.T, prefix string, now func() time.Time) redlimit.Refunder {
		// A timed-out call may or may not have run, so counts are exact only
		// while the store answers: the timeout outlasts a starved host.
		// Outages have their own tests in package resilient.
		l, err := resilient.New(redisStore(t, []string{redistest.Shared(t).Addr()}, prefix, now), resilient.Options{Timeout: 30 * time.Second, DenyCache: resilient.DenyCacheOptions{Size: -1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}},
}

func redisStore(t *testing.T, addrs []string, prefix string, now func() time.Time) *redisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The clock stands still while Redis's runs: the margin keeps the keys.
	s, err := redisstore.New(c, redisstore.WithClock(now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// uniq returns a key prefix of its own for a test.
func uniq() string { return fmt.Sprintf("reserve:%016x:", rand.Uint64()) }

func newLedger(t *testing.T, store redlimit.Refunder, opts reserve.Options) *reserve.Ledger {
	t.Helper()
	l, err := reserve.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var algorithms = []redlimit.Limit{
	redlimit.PerHour(1000).FixedWindow(),
	redlimit.PerHour(1000).SlidingWindow(),
	redlimit.PerHour(1000).SlidingLog(),
	redlimit.PerHour(1000).TokenBucket(1000),
}

// used returns how much of l key has used, as Peek shows it (Count less
// Remaining), with the store's clock standing still.
func used(t *testing.T, s redlimit.Limiter, key string, l redlimit.Limit) int64 {
	t.Helper()
	r, err := s.Peek(t.Context(), key, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed {
		return l.Max() - r.Remaining - 1 // Remaining after the peeked 1
	}
	return l.Max() - r.Remaining
}

// newClock returns a clock at t0.
func newClock() *redlimittest.Clock { return redlimittest.NewClock(t0) }
