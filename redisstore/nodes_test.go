package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// registryStore returns a store on srv with a client of its own that retries
// nothing, and its key prefix.
func registryStore(t *testing.T, srv *redistest.Server) (*redisstore.Store, string) {
	t.Helper()
	prefix := fmt.Sprintf("n%x:", rand.Uint64())
	return registryStoreWithPrefix(t, srv, prefix), prefix
}

func register(t *testing.T, s *redisstore.Store, opts redisstore.RegistryOptions) *redisstore.Registry {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	r, err := s.Register(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// waitNodes waits up to d for every registry to count want nodes.
func waitNodes(d time.Duration, want int, regs ...*redisstore.Registry) bool {
	deadline := time.Now().Add(d)
	for {
		all := true
		for _, r := range regs {
			all = all && r.Nodes() == want
		}
		if all || time.Now().After(deadline) {
			return all
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRegistryMixedIntervals: nodes beating at different intervals (a
// rolling change of the interval) all count each other.
func TestRegistryMixedIntervals(t *testing.T) {
	t.Parallel()
	s, _ := registryStore(t, redistest.Shared(t))
	var regs []*redisstore.Registry
	// Intervals long enough that a heartbeat delayed by a busy machine
	// (each has its interval to answer, and three intervals to count)
	// does not drop a node: this test is about the intervals' mix.
	// (At 100 and 500 ms, a beat delayed 200 ms under -race on a loaded
	// 2-core machine dropped a node.)
	for _, iv := range []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 1250 * time.Millisecond, 1250 * time.Millisecond} {
		regs = append(regs, register(t, s, redisstore.RegistryOptions{Interval: iv}))
	}
	// Each registry's lowest count over one and a half seconds (a beat of
	// the slower nodes within it), from when each has beaten once after
	// all were in.
	time.Sleep(1300 * time.Millisecond)
	lowest := []int{4, 4, 4, 4}
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for i, r := range regs {
			lowest[i] = min(lowest[i], r.Nodes())
		}
	}
	if lowest[0]+lowest[1]+lowest[2]+lowest[3] != 16 {
		t.Errorf("4 live nodes beating every 250 or 1250 ms: the registries counted as few as %v", lowest)
	}
}

// TestRegistryCountAfterRedisLostIt: after Redis restarts empty (or its
// clock jumps past the TTL, which empties the registry the same way), the
// first heartbeats read fewer nodes than there are until every node has
// beaten again; if Redis then hangs, no node must keep that low count.
func TestRegistryCountAfterRedisLostIt(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s, prefix := registryStore(t, srv)
	key := prefix + "{nodes}"
	var regs []*redisstore.Registry
	for i := range 3 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond) // heartbeats 100 ms apart
		}
		regs = append(regs, register(t, s, redisstore.RegistryOptions{Interval: 300 * time.Millisecond}))
	}
	if !waitNodes(2*time.Second, 3, regs...) {
		t.Fatalf("nodes never all 3")
	}
	for _, lose := range []struct {
		name string
		do   func() error
	}{
		{"restart", srv.Restart},
		{"emptied", func() error { _, err := srv.Do("DEL", key); return err }},
	} {
		if err := lose.do(); err != nil {
			t.Fatal(err)
		}
		// Hang Redis as soon as the first node has beaten again.
		deadline := time.Now().Add(2 * time.Second)
		for {
			n, err := srv.Do("ZCARD", key)
			if err == nil && n != "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no heartbeat within 2s (ZCARD %q, %v)", lose.name, n, err)
			}
			time.Sleep(time.Millisecond)
		}
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			for i, r := range regs {
				if n := r.Nodes(); n != 3 {
					srv.Resume()
					t.Fatalf("%s, then Redis hung: registry %d counts %d nodes, want 3", lose.name, i, n)
				}
			}
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(2 * time.Second)
		for n, _ := srv.Do("ZCARD", key); n != "3"; n, _ = srv.Do("ZCARD", key) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ZCARD %s 2s after Redis came back", lose.name, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !waitNodes(time.Second, 3, regs...) {
			t.Fatalf("%s: nodes never back to 3", lose.name)
		}
	}
}

// TestRegistryOptionsBounds: an Interval or TTL below a millisecond, a
// negative one, or a TTL not longer than the Interval is an error from
// Register. A TTL under a microsecond was sent to Redis as 0 µs, so that
// every node counted itself alone; a 1 ns Interval ran the heartbeats back
// to back against Redis; a TTL equal to the Interval lets a node's entry
// expire before its next heartbeat whenever that one is a little late.
func TestRegistryOptionsBounds(t *testing.T) {
	t.Parallel()
	s, _ := registryStore(t, redistest.Shared(t))
	for _, tc := range []struct {
		opts redisstore.RegistryOptions
		want string // in the error
	}{
		{redisstore.RegistryOptions{Interval: time.Nanosecond}, "Interval"},
		{redisstore.RegistryOptions{Interval: 500 * time.Microsecond}, "Interval"},
		{redisstore.RegistryOptions{Interval: 100 * time.Nanosecond, TTL: 500 * time.Nanosecond}, "Interval"},
		{redisstore.RegistryOptions{Interval: -time.Second}, "Interval"},
		{redisstore.RegistryOptions{TTL: -time.Second}, "TTL"},
		{redisstore.RegistryOptions{Interval: 10 * time.Millisecond, TTL: 10 * time.Millisecond}, "TTL"},
	} {
		tc.opts.Logger = slog.New(slog.DiscardHandler)
		r, err := s.Register(context.Background(), tc.opts)
		if err == nil {
			t.Errorf("Register(Interval %s, TTL %s): no error; it counts %d nodes", tc.opts.Interval, tc.opts.TTL, r.Nodes())
			r.Close()
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(Interval %s, TTL %s): %v; want an error naming %s", tc.opts.Interval, tc.opts.TTL, err, tc.want)
		}
	}
	// The least values are fine.
	r := register(t, s, redisstore.RegistryOptions{Interval: time.Millisecond, TTL: 2 * time.Millisecond})
	if r.Nodes() < 1 {
		t.Fatalf("%d nodes", r.Nodes())
	}
}

// TestRegistryCountAfterHang: Redis hangs longer than the heartbeat TTL,
// then resumes. The heartbeats that timed out during the hang run on
// resume and put each node back, so a node's next beat does not find
// itself missing. Still no node may count fewer than the 4 there are,
// before or after every node has beaten again.
func TestRegistryCountAfterHang(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	_, prefix := registryStore(t, srv)
	var regs []*redisstore.Registry
	for i := range 4 {
		if i > 0 {
			time.Sleep(70 * time.Millisecond) // heartbeats spread over the interval
		}
		s := registryStoreWithPrefix(t, srv, prefix)
		regs = append(regs, register(t, s, redisstore.RegistryOptions{Interval: 300 * time.Millisecond}))
	}
	if !waitNodes(3*time.Second, 4, regs...) {
		t.Fatalf("nodes never all 4")
	}
	// Which heartbeats run on resume, and in what order, varies: a
	// round or two of six have shown the drop.
	for round := range 6 {
		// SIGSTOP of the server this test started: 2 s, over twice the TTL.
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		// Every node beats several times within this.
		lowest := []int{4, 4, 4, 4}
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			for i, r := range regs {
				lowest[i] = min(lowest[i], r.Nodes())
			}
		}
		if lowest[0]+lowest[1]+lowest[2]+lowest[3] != 16 {
			t.Fatalf("round %d: after Redis hung 2 s (TTL 900 ms), the 4 live nodes counted as few as %v", round, lowest)
		}
	}
}

// registryStoreWithPrefix returns a store on srv with its own client that
// retries nothing, and the key prefix prefix: another node of one registry.
func registryStoreWithPrefix(t *testing.T, srv *redistest.Server, prefix string) *redisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRegistryCountThroughFaults is the registry's fault generator: 4
// nodes, and a random sequence of steps that each hang Redis (SIGSTOP or
// DEBUG SLEEP, shorter or longer than the TTL), restart it empty, or
// delete the registry. After each step, while every node beats again, no
// node may count fewer than the 4 there are.
func TestRegistryCountThroughFaults(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	_, prefix := registryStore(t, srv)
	const interval = 300 * time.Millisecond // TTL 900 ms
	var regs []*redisstore.Registry
	for range 4 {
		time.Sleep(time.Duration(rng.IntN(int(interval/time.Millisecond))) * time.Millisecond)
		s := registryStoreWithPrefix(t, srv, prefix)
		regs = append(regs, register(t, s, redisstore.RegistryOptions{Interval: interval}))
	}
	if !waitNodes(3*time.Second, 4, regs...) {
		t.Fatalf("nodes never all 4")
	}
	var steps []string
	for range 6 {
		hang := time.Duration(200+rng.IntN(2300)) * time.Millisecond
		var step string
		var err error
		switch rng.IntN(4) {
		case 0:
			step = "SIGSTOP " + hang.String()
			if err = srv.Pause(); err == nil {
				time.Sleep(hang)
				err = srv.Resume()
			}
		case 1:
			step = "DEBUG SLEEP " + hang.String()
			_, err = srv.Do("DEBUG", "SLEEP", strconv.FormatFloat(hang.Seconds(), 'f', 3, 64))
		case 2:
			step = "restart empty"
			err = srv.Restart()
		case 3:
			step = "registry deleted"
			_, err = srv.Do("DEL", prefix+"{nodes}")
		}
		steps = append(steps, step)
		if err != nil {
			t.Fatalf("seed %d, steps %q: %v", seed, steps, err)
		}
		lowest := []int{4, 4, 4, 4}
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			for i, r := range regs {
				lowest[i] = min(lowest[i], r.Nodes())
			}
		}
		if lowest[0]+lowest[1]+lowest[2]+lowest[3] != 16 {
			t.Fatalf("seed %d, steps %q: the 4 live nodes counted as few as %v after the last step", seed, steps, lowest)
		}
	}
}
