package resilient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// The fault tests run one at a time (no t.Parallel): they measure latency.

const (
	faultWorkers  = 64
	faultDeadline = resilient.DefaultTimeout
	// The bound on p99 latency during a fault is the deadline plus
	// 10 ms.
	faultP99 = faultDeadline + 10*time.Millisecond
)

type faultCase struct {
	name   string
	policy redlimit.FailurePolicy
}

var faultPolicies = []faultCase{{"fail_open", redlimit.FailOpen}, {"fail_closed", redlimit.FailClosed}, {"local", redlimit.FailLocal}}

// outage runs the load, applies fault after a warm-up, keeps it for hold,
// lifts it, and checks the guarantees of every policy.
func outage(t *testing.T, kind string, fault, lift func(*redistest.Server) error, hold time.Duration) {
	for _, pc := range faultPolicies {
		t.Run(pc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			const nodes = 4
			// Large enough that Redis never runs out before the fault (a
			// saturated key would be answered by the deny cache, not Redis),
			// small enough that the local share is reached during it.
			lim := redlimit.Per(40_000, time.Hour).SlidingWindow().OnFailure(pc.policy)
			share := int((lim.Count + nodes - 1) / nodes)
			l, err := resilient.New(redisStore(t, []string{srv.Addr()}), resilient.Options{Nodes: fixedNodes(nodes)})
			if err != nil {
				t.Fatal(err)
			}
			stopWatch := watchBreaker(l)

			stop := load(l, faultWorkers, []string{"hot"}, lim)
			time.Sleep(300 * time.Millisecond)
			if err := fault(srv); err != nil {
				t.Fatal(err)
			}
			down := time.Now()
			time.Sleep(hold)
			// The outage ends when lift starts: Redis may answer before
			// lift returns (a restarted server is ready a moment before
			// Restart does), and a decision takes microseconds with
			// the breaker closed again, so decisions that start then
			// may rightly come from Redis.
			lifting := time.Now()
			if err := lift(srv); err != nil {
				t.Fatal(err)
			}
			up := time.Now()
			time.Sleep(1500 * time.Millisecond)
			all := stop()
			seen := stopWatch()
			l.Close()

			during := between(all, down, lifting)
			errs := count(all, func(s sample) bool { return s.err != nil })
			if errs > 0 {
				t.Errorf("%d of %d decisions returned an error", errs, len(all))
			}
			if len(during) < 100 {
				t.Fatalf("only %d decisions during the outage", len(during))
			}
			fromStore := count(during, func(s sample) bool { return s.source == redlimit.FromStore })
			// Requests that had reached Redis before the fault may still
			// answer from it.
			if fromStore > faultWorkers {
				t.Errorf("%d decisions during the outage came from Redis", fromStore)
			}
			switch pc.policy {
			case redlimit.FailOpen:
				if n := count(during, func(s sample) bool { return s.source == redlimit.FromFailOpen && !s.allowed }); n > 0 {
					t.Errorf("fail_open denied %d", n)
				}
			case redlimit.FailClosed:
				if n := count(during, func(s sample) bool { return s.source != redlimit.FromStore && s.allowed }); n > 0 {
					t.Errorf("fail_closed allowed %d during the outage", n)
				}
			case redlimit.FailLocal:
				if n := count(during, func(s sample) bool { return s.source == redlimit.FromLocal && s.allowed }); n > share {
					t.Errorf("local fallback admitted %d during the outage, above this node's share %d", n, share)
				}
			}
			p := p99(during)
			if p > faultP99 {
				t.Errorf("p99 latency during the outage %s, want at most %s", p, faultP99)
			}
			recovered := firstFromStore(all, up, nil)
			if recovered < 0 || recovered > time.Second {
				t.Errorf("decisions back on Redis %s after it returned, want within 1s", recovered)
			}
			t.Logf("first decision from Redis %s after it returned", recovered)
			if !seen.during("open", down, up) {
				t.Errorf("the breaker never opened during the outage: %v", seen)
			}
			if !seen.during("closed", up, time.Now()) {
				t.Errorf("the breaker never closed after the outage: %v", seen)
			}
			report(t, "outage", "| %s | %s | %d | %d | %d | %s | %s | %s |", kind, pc.name, len(all), len(during),
				count(during, func(s sample) bool { return s.allowed }), p.Round(time.Microsecond), recovered.Round(time.Millisecond), fmt.Sprint(errs))
			checkNoGoroutineLeak(t)
		})
	}
}

// breakerLog is the breaker states seen, with the time each was first seen.
type breakerLog []struct {
	at    time.Time
	state string
}

// during reports whether state was seen at some time in [from, to].
func (b breakerLog) during(state string, from, to time.Time) bool {
	for i, e := range b {
		end := to
		if i+1 < len(b) {
			end = b[i+1].at
		}
		if e.state == state && !end.Before(from) && !e.at.After(to) {
			return true
		}
	}
	return false
}

// watchBreaker records the breaker's state changes until stopped.
func watchBreaker(l *resilient.Limiter) (stop func() breakerLog) {
	done := make(chan struct{})
	var seen breakerLog
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if s := l.BreakerState(); len(seen) == 0 || seen[len(seen)-1].state != s {
				seen = append(seen, struct {
					at    time.Time
					state string
				}{time.Now(), s})
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() breakerLog { close(done); wg.Wait(); return seen }
}

func TestFaultRedisKilledUnderLoad(t *testing.T) {
	outage(t, "SIGKILL 1s, restart", (*redistest.Server).Kill, (*redistest.Server).Restart, time.Second)
}

func TestFaultRedisHung(t *testing.T) {
	outage(t, "SIGSTOP 3s, SIGCONT", (*redistest.Server).Pause, (*redistest.Server).Resume, 3*time.Second)
}

// TestFaultScriptCacheLost flushes the script cache again and again under
// load: the store reloads the script and no caller sees an error.
func TestFaultScriptCacheLost(t *testing.T) {
	srv := redistest.Start(t)
	for _, name := range []string{"rueidis", "goredis"} {
		t.Run(name, func(t *testing.T) {
			var store *redisstore.Store
			if name == "rueidis" {
				store = redisStore(t, []string{srv.Addr()})
			} else {
				store = goRedisStore(t, srv.Addr())
			}
			lim := redlimit.PerHour(1_000_000).FixedWindow()
			stop := load(store, faultWorkers, []string{"a", "b", "c"}, lim)
			flushes := 0
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); flushes++ {
				if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			all := stop()
			errs := count(all, func(s sample) bool { return s.err != nil })
			for _, s := range all {
				if s.err != nil {
					t.Errorf("a caller saw %v", s.err)
					break
				}
			}
			report(t, "flush", "| SCRIPT FLUSH every 20 ms, %d times | %s | %d | %d |", flushes, name, len(all), errs)
		})
	}
}

func TestFaultBadConnectionSettings(t *testing.T) {
	t.Parallel()
	plain := redistest.Start(t)
	locked := redistest.Start(t, "--requirepass", "right")
	closedPort := redistest.Start(t)
	deadAddr := closedPort.Addr()
	closedPort.Stop()
	cases := []struct {
		name, url string
		want      []string // the error must name one of these
	}{
		{"wrong port", "redis://" + deadAddr + "?dial_timeout=2s", []string{"connection refused", deadAddr}},
		{"wrong password", "redis://:wrong@" + locked.Addr(), []string{"WRONGPASS", "invalid password", "invalid username-password"}},
		{"no password", "redis://" + locked.Addr(), []string{"NOAUTH", "Authentication required"}},
		{"TLS to a plain port", "rediss://" + plain.Addr() + "?dial_timeout=2s", []string{"tls", "TLS"}},
		{"bad scheme", "http://" + plain.Addr(), []string{"scheme"}},
		{"bad database", "redis://" + plain.Addr() + "/x", []string{"database"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			s, err := redisstore.Open(ctx, c.url)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s): no error", c.url)
			}
			if !errors.Is(err, redisstore.ErrConnect) {
				t.Errorf("error does not wrap ErrConnect: %v", err)
			}
			named := false
			for _, w := range c.want {
				named = named || strings.Contains(err.Error(), w)
			}
			if !named {
				t.Errorf("error %q names none of %q", err, c.want)
			}
			if strings.Contains(err.Error(), "wrong") && strings.Contains(c.url, ":wrong@") {
				t.Errorf("the error leaks the password: %v", err)
			}
			report(t, "settings", "| %s | %s | `%s` |", c.name, time.Since(start).Round(time.Millisecond), err.Error())
		})
	}
	// And the right settings work, with ACL user and database number.
	if _, err := locked.Do("ACL", "SETUSER", "app", "on", ">apppass", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"redis://:right@" + locked.Addr(), "redis://app:apppass@" + locked.Addr() + "/3"} {
		s, err := redisstore.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("Open(%s): %v", redisstore.Redacted(u), err)
		}
		if r, err := s.Allow(context.Background(), "k", redlimit.PerSecond(1)); err != nil || !r.Allowed {
			t.Errorf("%s: %+v, %v", redisstore.Redacted(u), r, err)
		}
		s.Close()
	}
}
