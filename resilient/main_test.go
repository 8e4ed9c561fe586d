package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// counting wraps a real store and counts the calls that reach it.
type counting struct {
	redlimit.Limiter
	calls atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	c.calls.Add(1)
	return c.Limiter.AllowN(ctx, key, l, n)
}

func (c *counting) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	c.calls.Add(1)
	return c.Limiter.AllowAll(ctx, reqs)
}

// fixedNodes is a NodeCounter with a set count.
type fixedNodes = resilient.FixedNodes

// redisStore returns a store on srv with a client of its own and a fresh
// prefix. The client retries nothing, so a dead server fails fast.
func redisStore(t testing.TB, addrs []string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(fmt.Sprintf("r%x:", rand.Uint64()))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newLimiter(t testing.TB, store redlimit.Limiter, opts resilient.Options) *resilient.Limiter {
	t.Helper()
	l, err := resilient.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// recordOpen makes opts record whether the breaker has opened. A busy
// host may outlast CoolDown before a test reads BreakerState: the open
// breaker is half-open by then.
func recordOpen(opts *resilient.Options) *atomic.Bool {
	o := &openRecorder{}
	opts.Observer = o
	return &o.opened
}

// openRecorder is an Observer that records whether the breaker opened.
type openRecorder struct{ opened atomic.Bool }

func (*openRecorder) Decided(bool, redlimit.Source)    {}
func (*openRecorder) StoreCalled(time.Duration, error) {}
func (o *openRecorder) BreakerChanged(_, to string, _ error) {
	o.opened.Store(o.opened.Load() || to == "open")
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// warmUp lets the load run for d, or less once key has used a quarter of
// lim, as l's store says: a fault's test needs the key well under its
// limit when the fault comes, however fast this machine decides.
func warmUp(l *resilient.Limiter, key string, lim redlimit.Limit, d time.Duration) {
	waitFor(d, func() bool {
		r, err := l.Peek(context.Background(), key, lim, 1)
		return err == nil && r.Source == redlimit.FromStore && r.Remaining <= lim.Count*3/4
	})
}

// goRedisStore returns a store on a go-redis client of its own.
func goRedisStore(t testing.TB, addr string) *redisstore.Store {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.NewGoRedis(c, redisstore.WithPrefix(fmt.Sprintf("g%x:", rand.Uint64())))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
