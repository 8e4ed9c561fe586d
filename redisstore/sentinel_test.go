package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestSentinelFailover fails the master of a Sentinel deployment (a
// master, its replica, three sentinels) under Stores opened through the
// sentinels, and shows that:
//   - a Store follows the sentinels to the promoted replica without being
//     reopened: its decisions fail, each within its deadline, until the
//     client has switched, then succeed;
//   - what was replicated before the fault still counts: a limit
//     exhausted before stays exhausted, a limit partly used keeps what it
//     had left;
//   - a resilient.Limiter in front of another Store answers from its
//     failure policy within its deadline during the failover, and from
//     Redis again after it.
//
// The master is SIGKILLed (and restarted empty after the failover: the
// Stores stay on the promoted replica); SIGKILLed with the sentinel the
// clients watch for the switch (a sentinel on the master's host);
// SIGKILLed while that sentinel hangs (SIGSTOP: its connections stay open
// and silent); SIGSTOPped (calls to it hang rather than fail); or switched
// over to the replica on an operator's command (SENTINEL FAILOVER: the old
// master lives on as a replica). It logs how long the failover took, as
// the Store saw it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	redistest.Exclusive(t)
	for _, c := range []struct{ fault, query string }{
		{"master killed", ""},
		{"master and watched sentinel killed", ""},
		// The clients notice the hung sentinel after about twice
		// write_timeout plus dial_timeout (22 s measured with the
		// defaults, 10 s and 5 s): shortened here.
		{"master killed, watched sentinel hung", "&write_timeout=3s&dial_timeout=1s"},
		{"master paused", ""},
		{"switchover", ""},
	} {
		t.Run(c.fault, func(t *testing.T) {
			t.Parallel()
			testSentinelFailover(t, c.fault, c.query)
		})
	}
}

func testSentinelFailover(t *testing.T, fault, query string) {
	const (
		callTimeout = time.Second            // of each call to the Store
		frontLimit  = 500 * time.Millisecond // the resilient limiter's Timeout
		margin      = time.Second            // a busy host's scheduling, on top of either
		recovery    = 30 * time.Second
	)
	g := redistest.StartSentinelGroup(t, "mymaster")
	sentinels := g.SentinelAddrs()
	url := "redis://" + sentinels[0] + "?addr=" + sentinels[1] + "&addr=" + sentinels[2] + "&master_set=" + g.Name + query
	pfx := prefix(t)
	open := func() *redisstore.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := redisstore.Open(ctx, url, redisstore.WithPrefix(pfx))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	store := open()
	front, err := resilient.New(open(), resilient.Options{Timeout: frontLimit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })

	limits := []redlimit.Limit{
		// A window of 1,000 hours: no window starts during the test.
		redlimit.Per(5, 1000*time.Hour).SlidingWindow(),
		redlimit.Per(5, time.Hour).SlidingLog(),
	}
	both := func(key string) []redlimit.Request {
		return []redlimit.Request{{Key: key, Limit: limits[0], Cost: 1}, {Key: key, Limit: limits[1], Cost: 1}}
	}
	decide := func(l redlimit.Limiter, key string) (redlimit.Decision, error) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		return l.AllowAll(ctx, both(key))
	}
	// "full" exhausts both limits, "part" uses 3 of their 5; openLimit
	// has room for every call of the test.
	for i := range 6 {
		d, err := decide(store, "full")
		if err != nil || d.Allowed != (i < 5) {
			t.Fatalf("full, call %d before the fault: %+v, %v", i, d, err)
		}
	}
	for i := range 3 {
		if d, err := decide(store, "part"); err != nil || !d.Allowed {
			t.Fatalf("part, call %d before the fault: %+v, %v", i, d, err)
		}
	}
	openLimit := redlimit.Per(1<<40, 1000*time.Hour).SlidingWindow()
	if r, err := front.Allow(context.Background(), "open", openLimit); err != nil || !r.Allowed || r.Source != redlimit.FromStore {
		t.Fatalf("open before the fault: %+v, %v", r, err)
	}
	if d, err := decide(front, "full"); err != nil || d.Allowed || d.Results[0].Source != redlimit.FromStore {
		t.Fatalf("full through the resilient limiter before the fault: %+v, %v", d, err)
	}
	// The decisions are on the replica before the fault.
	if err := g.Master.WaitReplicated(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The clients watch the first sentinel for the switch.
	if n := subscribers(t, g.Sentinels[0]); n != 2 {
		t.Fatalf("%d clients subscribed on the first sentinel, want the Stores' 2", n)
	}

	faulted := time.Now()
	switch fault {
	case "master killed":
		err = g.Master.Kill()
	case "master and watched sentinel killed":
		if err = g.Sentinels[0].Kill(); err == nil {
			err = g.Master.Kill()
		}
	case "master killed, watched sentinel hung":
		if err = g.Sentinels[0].Pause(); err == nil {
			err = g.Master.Kill()
		}
	case "master paused":
		err = g.Master.Pause()
	case "switchover":
		_, err = g.Sentinels[1].Do("SENTINEL", "FAILOVER", g.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
	// promoted reports whether the replica is a master: from then on it
	// replicates nothing, and a write found on it was made on it
	// (wroteOnReplica), not on the old master.
	promoted := func() bool {
		role, err := g.Replica.Do("ROLE")
		return err == nil && strings.HasPrefix(role, "master\n")
	}
	wroteOnReplica := func(key string) bool {
		n, err := g.Replica.Do("EVAL", "return #redis.call('KEYS', ARGV[1])", "0", store.KeyOf(key, openLimit)+"*")
		return err == nil && n != "0"
	}
	var (
		wg                            sync.WaitGroup
		switched, stored, frontStored time.Duration // since the fault
		failed, frontLocal            int
		slowest, frontSlowest         time.Duration
		lastErr                       error
	)
	// The sentinels' view: when they name the replica as the master.
	wg.Go(func() {
		for time.Since(faulted) < recovery {
			if addr, err := g.MasterAddr(); err == nil && addr == g.Replica.Addr() {
				switched = time.Since(faulted)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// The Store: fails, each call within its deadline, then writes on the
	// promoted replica.
	wg.Go(func() {
		for i := 0; time.Since(faulted) < recovery; i++ {
			after := promoted()
			probe := fmt.Sprint("probe", i)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			_, err := store.Allow(ctx, probe, openLimit)
			cancel()
			slowest = max(slowest, time.Since(start))
			var d redlimit.Decision
			if err == nil {
				start = time.Now()
				d, err = decide(store, "full")
				slowest = max(slowest, time.Since(start))
			}
			if err != nil {
				failed++
				lastErr = err
			} else if d.Allowed || d.Results[0].Remaining != 0 || d.Results[1].Remaining != 0 {
				t.Errorf("full during the failover: %+v; want denied with nothing remaining", d)
				return
			} else if after && wroteOnReplica(probe) {
				stored = time.Since(faulted)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	// The resilient limiter: never an error, "full" never allowed, every
	// answer within its deadline; then Redis answers again, the promoted
	// replica.
	wg.Go(func() {
		for i := 0; time.Since(faulted) < recovery; i++ {
			after := promoted()
			probe := fmt.Sprint("front", i)
			start := time.Now()
			r, err := front.Allow(context.Background(), probe, openLimit)
			d, derr := decide(front, "full")
			frontSlowest = max(frontSlowest, time.Since(start))
			if err != nil || derr != nil || !r.Allowed || d.Allowed {
				t.Errorf("through the resilient limiter during the failover: %s %+v, %v; full %+v, %v", probe, r, err, d, derr)
				return
			}
			if r.Source != redlimit.FromStore {
				frontLocal++
			} else if after && wroteOnReplica(probe) {
				frontStored = time.Since(faulted)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Wait()
	t.Logf("%s: the sentinels named the replica %v after the fault; the Store's first decision on it %v after it (%d calls failed before, the slowest took %v; last error: %v); the resilient limiter's first answer from it %v after it (%d from its policy, the slowest pair took %v)",
		fault, switched, stored, failed, slowest, lastErr, frontStored, frontLocal, frontSlowest)
	if t.Failed() {
		return
	}
	if stored == 0 || frontStored == 0 {
		t.Fatalf("no decision on Redis %v after the fault (the Store's: %v, the resilient limiter's: %v; the sentinels switched after %v)", recovery, stored, frontStored, switched)
	}
	if slowest > callTimeout+margin {
		t.Errorf("a call to the Store took %v during the failover, above its deadline %v", slowest, callTimeout)
	}
	if frontSlowest > 2*(frontLimit+margin) {
		t.Errorf("two calls to the resilient limiter took %v during the failover, above twice its deadline %v", frontSlowest, frontLimit)
	}
	if addr, err := g.MasterAddr(); err != nil || addr != g.Replica.Addr() {
		t.Fatalf("the sentinels name %q (%v) as the master, want the replica %s", addr, err, g.Replica.Addr())
	}

	// "part" has 2 left under both limits, on the promoted replica.
	for i, want := range []bool{true, true, false} {
		d, err := decide(store, "part")
		if err != nil || d.Allowed != want {
			t.Fatalf("part, call %d after the failover: %+v, %v; want allowed %v (3 of 5 used before the fault)", i, d, err, want)
		}
	}
	// The resilient limiter decides on Redis again.
	for i := range 10 {
		r, err := front.Allow(context.Background(), "open", openLimit)
		if err != nil || !r.Allowed || r.Source != redlimit.FromStore {
			t.Fatalf("open, call %d after the failover: %+v, %v; want allowed by the store", i, r, err)
		}
	}
	if n, err := g.Replica.Do("EVAL", "return #redis.call('KEYS', ARGV[1])", "0", pfx+"*"); err != nil || n == "0" {
		t.Errorf("keys on the promoted replica: %q, %v", n, err)
	}

	if fault != "master killed" {
		return
	}
	// The old master comes back empty (no persistence) and claims to be a
	// master until the sentinels make it a replica (they see it within
	// 10 s): the Stores stay on the promoted replica, where "full" is
	// exhausted.
	if err := g.Master.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		d, err := decide(store, "full")
		if err != nil || d.Allowed || d.Results[0].Source != redlimit.FromStore {
			role, _ := g.Master.Do("ROLE")
			t.Fatalf("full, call %d after the old master restarted: %+v, %v; want denied by the store (the old master's ROLE: %q)", i, d, err, role)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// subscribers returns how many clients of s are subscribed to channels.
func subscribers(t *testing.T, s *redistest.Server) int {
	t.Helper()
	out, err := s.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(out) {
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "sub="); ok && v != "0" {
				n++
			}
		}
	}
	return n
}
