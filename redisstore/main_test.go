package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// deployment is one way of reaching Redis the tests run against.
type deployment struct {
	name    string
	cluster bool
	goRedis bool
}

var deployments = []deployment{
	{"rueidis/standalone", false, false},
	{"goredis/standalone", false, true},
	{"rueidis/cluster", true, false},
	{"goredis/cluster", true, true},
}

// addrs returns the addresses of the shared server or cluster.
func (d deployment) addrs(t testing.TB) []string {
	if d.cluster {
		return redistest.SharedCluster(t).Addrs()
	}
	return []string{redistest.Shared(t).Addr()}
}

// store returns a Store on a client of its own, closed when t ends.
func (d deployment) store(t testing.TB, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	addrs := d.addrs(t)
	var s *redisstore.Store
	var err error
	if d.goRedis {
		var c redis.UniversalClient
		if d.cluster {
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
		} else {
			c = redis.NewClient(&redis.Options{Addr: addrs[0], PoolSize: 64})
		}
		t.Cleanup(func() { c.Close() })
		s, err = redisstore.NewGoRedis(c, opts...)
	} else {
		c, cerr := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		if cerr != nil {
			t.Fatalf("rueidis client for %v: %v", addrs, cerr)
		}
		t.Cleanup(c.Close)
		s, err = redisstore.New(c, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do runs one command on the node that serves key (any node when key is "").
func (d deployment) do(t testing.TB, key string, args ...string) string {
	t.Helper()
	srv := redistest.Shared(t)
	if d.cluster {
		var err error
		if key == "" {
			srv = redistest.SharedCluster(t).Masters()[0]
		} else if srv, err = redistest.SharedCluster(t).MasterFor(key); err != nil {
			t.Fatal(err)
		}
	}
	out, err := srv.Do(args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

// keysWithPrefix lists the keys starting with prefix on every master.
func (d deployment) keysWithPrefix(t testing.TB, prefix string) []string {
	t.Helper()
	servers := []*redistest.Server{redistest.Shared(t)}
	if d.cluster {
		servers = redistest.SharedCluster(t).Masters()
	}
	var keys []string
	for _, srv := range servers {
		out, err := srv.Do("KEYS", prefix+"*")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range strings.Split(out, "\n") {
			if k != "" {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// countKeys counts the keys starting with prefix on every master; unlike
// keysWithPrefix, it counts keys holding newlines right.
func (d deployment) countKeys(t testing.TB, prefix string) int {
	t.Helper()
	servers := []*redistest.Server{redistest.Shared(t)}
	if d.cluster {
		servers = redistest.SharedCluster(t).Masters()
	}
	n := 0
	for _, srv := range servers {
		out, err := srv.Do("EVAL", "return #redis.call('KEYS', ARGV[1])", "0", prefix+"*")
		if err != nil {
			t.Fatal(err)
		}
		c, err := strconv.Atoi(out)
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

// prefix returns a key prefix no other test uses.
func prefix(t testing.TB) string {
	return fmt.Sprintf("t%x:", rand.Uint64())
}

// pacedClock is an explicit clock for tests on Redis. Redis expires keys on
// its own clock, with TTLs computed from the explicit times, so an explicit
// clock that ran slower than real time would see state vanish early:
// keepUp moves it forward by at least the real time since its last call.
type pacedClock struct {
	*redlimittest.Clock
	lastReal    time.Time
	lastVirtual time.Time
}

func newPacedClock(start time.Time) *pacedClock {
	return &pacedClock{Clock: redlimittest.NewClock(start), lastReal: time.Now(), lastVirtual: start}
}

func (c *pacedClock) keepUp() {
	if lag := time.Since(c.lastReal) - c.Now().Sub(c.lastVirtual); lag > 0 {
		c.Advance(lag.Truncate(time.Microsecond) + time.Microsecond)
	}
	c.lastReal, c.lastVirtual = time.Now(), c.Now()
}

// wander moves the clock as the differential tests do: forward by up to
// fwd one time in three, back by up to 50ms one time in twelve (until the
// next keepUp).
func (c *pacedClock) wander(rng *rand.Rand, fwd time.Duration) {
	switch rng.IntN(12) {
	case 0, 1, 2, 3:
		c.Advance(time.Duration(rng.Int64N(int64(fwd/time.Microsecond))) * time.Microsecond)
	case 4:
		c.Advance(-time.Duration(rng.IntN(50_000)) * time.Microsecond)
	}
}

// resync makes the clock's next keepUp count real time from now.
func (c *pacedClock) resync() { c.lastReal, c.lastVirtual = time.Now(), c.Now() }
