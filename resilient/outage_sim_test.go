package resilient_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// simNodes are nodes sharing one Redis state, each with a down switch of
// its own (a partition cuts one node off), on one injected clock: Redis,
// the limiters and their fallbacks read it, so an outage of seconds takes
// milliseconds.
type simNodes struct {
	at    atomic.Int64 // nanoseconds since base
	base  time.Time
	nodes []*resilient.Limiter
	down  []*atomic.Bool
	turn  int               // the node the next request goes to
	redis *redisstore.Store // the state, read past the nodes
}

func (s *simNodes) now() time.Time { return s.base.Add(time.Duration(s.at.Load())) }

// newSimNodes starts n nodes, each counting n live nodes, on srv.
func newSimNodes(t *testing.T, srv *redistest.Server, n int) *simNodes {
	t.Helper()
	s := &simNodes{base: time.Now().UTC().Truncate(time.Second)}
	prefix := redisstore.WithPrefix(fmt.Sprintf("f%x:", rand.Uint64()))
	for range n {
		down := new(atomic.Bool)
		fb, err := memory.New(memory.WithClock(s.now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fb.Close() })
		raw := redisStore(t, []string{srv.Addr()}, prefix, redisstore.WithClock(s.now), redisstore.WithTTLMargin(time.Hour))
		s.redis = raw
		store := downStore{raw, down}
		s.nodes = append(s.nodes, newLimiter(t, store, resilient.Options{
			Nodes: fixedNodes(n), Now: s.now, Breaker: resilient.BreakerOptions{FailureThreshold: 1, CoolDown: time.Millisecond}, Fallback: resilient.FallbackOptions{Limiter: fb}, Reconcile: resilient.ReconcileOptions{Spread: -1}, Timeout: time.Second,
			Logger: slog.New(slog.DiscardHandler),
		}))
		s.down = append(s.down, down)
	}
	return s
}

// cut switches the store off for the nodes in which (nil: every node), or
// back on for all; back on, it waits out the breakers' cool-down.
func (s *simNodes) cut(which []int, off bool) {
	if !off {
		for _, d := range s.down {
			d.Store(false)
		}
		time.Sleep(3 * time.Millisecond) // the breakers' cool-down, real time
		return
	}
	if which == nil {
		for _, d := range s.down {
			d.Store(true)
		}
		return
	}
	for _, i := range which {
		s.down[i].Store(true)
	}
}

// simEvent is one decision of a run: when, and whether it was admitted.
type simEvent struct {
	at      time.Duration
	allowed bool
}

// run sends one request of key every interval for d, round robin over the
// nodes, and returns the decisions.
func (s *simNodes) run(t *testing.T, key string, lim redlimit.Limit, d, interval time.Duration) []simEvent {
	t.Helper()
	var out []simEvent
	for i := 0; time.Duration(i)*interval < d; i++ {
		s.at.Add(int64(interval))
		s.turn = (s.turn + 1) % len(s.nodes)
		r, err := s.nodes[s.turn].Allow(context.Background(), key, lim)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, simEvent{time.Duration(s.at.Load()), r.Allowed})
	}
	return out
}

// admitted counts the events admitted in [from, to).
func admitted(evs []simEvent, from, to time.Duration) int {
	n := 0
	for _, e := range evs {
		if e.allowed && e.at >= from && e.at < to {
			n++
		}
	}
	return n
}

// maxInWindow returns the most events admitted in any window of length w.
func maxInWindow(evs []simEvent, w time.Duration) int {
	most, j, n := 0, 0, 0
	for i, e := range evs {
		if e.allowed {
			n++
		}
		for evs[j].at <= evs[i].at-w {
			if evs[j].allowed {
				n--
			}
			j++
		}
		most = max(most, n)
	}
	return most
}

// TestTokenBucketAdmitsAtTheRateAfterAnOutage: four nodes share a token
// bucket of 40/s (burst 40) with traffic at the rate before, during and
// after an outage of 8 s. What the nodes admitted locally was refilled as
// it was spent: once Redis is back, traffic at the rate is admitted at the
// rate (docs/RELIABILITY.md, "What is charged"). A node that charged all
// it admitted at once, as if spent at that instant, would have Redis deny
// for about as long as the outage lasted. Over any second, no more than
// the bucket's burst and rate plus one per node (the probes, which charge
// nothing first) is admitted, with traffic at twice the rate too.
func TestTokenBucketAdmitsAtTheRateAfterAnOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	lim := redlimit.PerSecond(40).TokenBucket(40)
	const interval = 25 * time.Millisecond // the rate
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"at the rate", interval}, {"at twice the rate", interval / 2}} {
		t.Run(c.name, func(t *testing.T) {
			s := newSimNodes(t, srv, 4)
			key := fmt.Sprint("k", rand.Uint64())
			evs := s.run(t, key, lim, 2*time.Second, c.interval)
			s.cut(nil, true)
			evs = append(evs, s.run(t, key, lim, 8*time.Second, c.interval)...)
			s.cut(nil, false)
			back := time.Duration(s.at.Load())
			evs = append(evs, s.run(t, key, lim, 4*time.Second, c.interval)...)
			for sec := range 4 {
				from := back + time.Duration(sec)*time.Second
				n := admitted(evs, from, from+time.Second)
				t.Logf("second %d after the outage: %d admitted", sec+1, n)
				if n < 38 {
					t.Errorf("second %d after the outage: %d admitted, want about 40 (the rate)", sec+1, n)
				}
			}
			if most, bound := maxInWindow(evs, time.Second), int(lim.Burst+lim.Count)+4; most > bound {
				t.Errorf("%d admitted within a second, bound %d", most, bound)
			}
		})
	}
}

// TestOutageBounds measures what docs/RELIABILITY.md states as the
// bounds of an outage with local: four nodes, traffic at four times the rate,
// and the most admitted within any period. With every node cut off,
// each node admits its share, rounded up, every period: up to N − 1 above
// the limit each period, not once. With one node cut off alone (a
// partition), the others get the whole limit from Redis and that node its
// share on top.
func TestOutageBounds(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	const nodes = 4
	for _, c := range []struct {
		name  string
		lim   redlimit.Limit
		cut   []int // nil: every node
		bound int   // the most admitted within a period
	}{
		// ceil(5/4) = 2 a node: 8 a period; the probes, one a node, after.
		{"every node, rounding", redlimit.PerSecond(5).SlidingLog(), nil, 8 + nodes},
		{"every node", redlimit.PerSecond(40).SlidingLog(), nil, 40 + nodes},
		{"every node, token bucket", redlimit.PerSecond(40).TokenBucket(40), nil, 40 + 40 + nodes},
		// 40 from Redis and 10, the share, by the node cut off.
		{"one node", redlimit.PerSecond(40).SlidingLog(), []int{0}, 40 + 10 + 1},
		{"one node, rounding", redlimit.PerSecond(5).SlidingLog(), []int{0}, 5 + 2 + 1},
		{"one node, token bucket", redlimit.PerSecond(40).TokenBucket(40), []int{0}, 40 + 40 + 10 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSimNodes(t, srv, nodes)
			key := fmt.Sprint("k", rand.Uint64())
			interval := c.lim.Period / time.Duration(4*c.lim.Count)
			evs := s.run(t, key, c.lim, 2*time.Second, interval)
			s.cut(c.cut, true)
			from := time.Duration(s.at.Load())
			evs = append(evs, s.run(t, key, c.lim, 5*time.Second, interval)...)
			s.cut(nil, false)
			evs = append(evs, s.run(t, key, c.lim, 3*time.Second, interval)...)
			during := admitted(evs, from+c.lim.Period, from+5*c.lim.Period) / 4
			most := maxInWindow(evs, c.lim.Period)
			t.Logf("%s: %d admitted a period during the outage, at most %d within a period, limit %d", c.lim, during, most, c.lim.Count)
			if most > c.bound {
				t.Errorf("%d admitted within a period, bound %d", most, c.bound)
			}
		})
	}
}
