package resilient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// holdingProxy is a TCP proxy on loopback in front of a Redis. While on,
// it holds the first script call (EVAL, EVALSHA) of every period for a
// while before passing it on, and the commands behind it on its
// connection: a Redis that times out now and then.
type holdingProxy struct {
	addr   string
	every  time.Duration
	hold   time.Duration
	on     atomic.Bool
	last   atomic.Int64 // when the latest hold began, in Unix nanoseconds
	holds  atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// startHoldingProxy starts a proxy to target, closed at the end of the test.
func startHoldingProxy(t *testing.T, target string, every, hold time.Duration) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{addr: ln.Addr().String(), every: every, hold: hold}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

// keep records c to close at the end, or closes it if that has come.
func (p *holdingProxy) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *holdingProxy) serve(c net.Conn, target string) {
	s, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	if !p.keep(c) || !p.keep(s) {
		c.Close()
		s.Close()
		return
	}
	go func() {
		io.Copy(c, s)
		c.Close()
	}()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if p.on.Load() && bytes.Contains(buf[:n], []byte("EVAL")) && p.due() {
				time.Sleep(p.hold)
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// due reports whether a hold is due now, and counts it.
func (p *holdingProxy) due() bool {
	now := time.Now().UnixNano()
	last := p.last.Load()
	if now-last < int64(p.every) || !p.last.CompareAndSwap(last, now) {
		return false
	}
	p.holds.Add(1)
	return true
}

// TestRejoinEndsUnderSparseTimeouts: after an outage, a Redis that
// times out once a second (a loopback proxy holds one call a second past
// the Timeout) does not keep a node rejoining: the node's share answers
// most decisions without a store call, so one timeout a second is a large
// share of the calls made, but a small share of the decisions. Rejoining
// ends within a bound, and afterwards every denial is Redis's: clients get
// their whole limit, as without the timeouts.
func TestRejoinEndsUnderSparseTimeouts(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	const (
		timeout = 200 * time.Millisecond
		// The rejoin ends Rejoin (the default, 2 s: longer than the
		// time between timeouts) after the last failure that extends it,
		// and failures extend it until the share of failures falls from
		// all (the outage) below a sixteenth: about 90 decisions. The
		// rest is a margin for a busy machine.
		bound = resilient.DefaultRejoin + 3*time.Second
		run   = bound + 3*time.Second
	)
	for _, c := range []struct {
		name  string
		holds bool
	}{{"one timeout a second", true}, {"no timeouts", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// Held 1.5 Timeouts: the call held fails, the next one sent
			// behind it has the rest of its deadline.
			proxy := startHoldingProxy(t, srv.Addr(), time.Second, timeout*3/2)
			var down atomic.Bool
			opts := resilient.Options{
				Nodes: fixedNodes(4), Timeout: timeout,
				// A timeout never opens the breaker: 3 in a row would.
				Breaker: resilient.BreakerOptions{FailureThreshold: 3, CoolDown: 20 * time.Millisecond}, Reconcile: resilient.ReconcileOptions{Spread: -1},
			}
			opened := recordOpen(&opts)
			l := newLimiter(t, switchable{redisStore(t, []string{proxy.addr}), &down}, opts)
			down.Store(true)
			open := redlimit.PerHour(1000).OnFailure(redlimit.FailOpen)
			for range 3 {
				if r, err := l.Allow(ctx, "other", open); err != nil || r.Source != redlimit.FromFailOpen {
					t.Fatalf("Redis down: %+v, %v; want fail-open", r, err)
				}
			}
			if !opened.Load() {
				t.Fatalf("breaker %s after three failures, never opened", l.BreakerState())
			}
			down.Store(false)
			backOnStore(t, l) // rejoining from here
			back := time.Now()
			proxy.on.Store(c.holds)
			lim := redlimit.PerSecond(20).SlidingLog() // a share of 5 on 4 nodes
			key := fmt.Sprint("k", rand.Uint64())
			var lastShareDenial time.Duration
			admitted := map[bool]int{} // after the bound or not
			decisions, late := 0, 0
			for time.Since(back) < run {
				start := time.Now()
				r, err := l.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				decisions++
				at := start.Sub(back)
				if r.Allowed {
					admitted[at > bound]++
				}
				switch {
				case time.Since(start) >= timeout/2:
					late++ // met a hold: the fallback may deny, rejoining or not
				case !r.Allowed && r.Source == redlimit.FromLocal:
					lastShareDenial = at
				}
				time.Sleep(2 * time.Millisecond)
			}
			holds := proxy.holds.Load()
			t.Logf("%d decisions, %d holds, %d met a hold; the share denied last at %s; admitted %.1f/s before %s, %.1f/s after (limit %d/s)",
				decisions, holds, late, lastShareDenial.Round(time.Millisecond), float64(admitted[false])/bound.Seconds(), bound,
				float64(admitted[true])/(run-bound).Seconds(), lim.Count)
			if c.holds && holds < int64(run/time.Second)-1 {
				t.Fatalf("%d holds in %s, want one a second", holds, run)
			}
			if lastShareDenial > bound {
				t.Errorf("the node's share still denied %s after the outage, want its rejoin over within %s: after it, every denial is Redis's", lastShareDenial.Round(time.Millisecond), bound)
			}
		})
	}
}
