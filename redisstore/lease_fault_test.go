package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// leaseChildEnv, set, makes TestLeaseHolderKilled the holder: a child
// process that takes slots and waits to be killed. Its value is the
// address and the prefix.
const leaseChildEnv = "REDLIMIT_LEASE_HOLDER"

// storeAt returns a Store on a client of its own for addr.
func storeAt(t testing.TB, addr string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("client for %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitAllFree acquires c's every slot on key with fresh ids, retrying
// until within, and returns how long it took.
func waitAllFree(t *testing.T, s *redisstore.Store, key string, c redlimit.Concurrency, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	var got int64
	for got < c.Slots {
		l, err := s.Acquire(ctx, key, c, redlimit.NewLeaseID())
		switch {
		case err != nil && time.Since(start) > within:
			t.Fatalf("after %v: %v", time.Since(start), err)
		case err == nil && l.Held:
			got++
			continue
		case time.Since(start) > within:
			t.Fatalf("after %v: %d of %d slots free", time.Since(start), got, c.Slots)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestLeaseHolderKilled: a holder killed with SIGKILL frees its slots
// within the TTL. The holder is this test binary, run again.
func TestLeaseHolderKilled(t *testing.T) {
	c := redlimit.InFlight(3, 1500*time.Millisecond)
	if v := os.Getenv(leaseChildEnv); v != "" {
		addr, p, _ := strings.Cut(v, " ")
		s := storeAt(t, addr, redisstore.WithPrefix(p))
		for range c.Slots {
			if l, err := s.Acquire(context.Background(), "job", c, redlimit.NewLeaseID()); err != nil || !l.Held {
				fmt.Printf("failed %+v %v\n", l, err)
				os.Exit(1)
			}
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	srv := redistest.Shared(t)
	p := prefix(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderKilled$")
	cmd.Env = append(os.Environ(), leaseChildEnv+"="+srv.Addr()+" "+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("holder said %q", line)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	s := storeAt(t, srv.Addr(), redisstore.WithPrefix(p))
	if l, err := s.Acquire(context.Background(), "job", c, "early"); err != nil || l.Held {
		t.Fatalf("a slot freed at once: %+v, %v", l, err)
	}
	// The slots free at the TTL, by Redis's clock; the margin is for a
	// busy machine.
	waitAllFree(t, s, "job", c, c.TTL+3*time.Second)
	t.Logf("freed %v after the kill (TTL %v)", time.Since(killed), c.TTL)
}

// TestLeaseRestartAndFailover: a Redis restart (keeping its data or not)
// or a failover to a replica leaves no slot taken longer than a TTL.
func TestLeaseRestartAndFailover(t *testing.T) {
	c := redlimit.InFlight(4, 1500*time.Millisecond)
	hold := func(t *testing.T, s *redisstore.Store) {
		for range c.Slots {
			if l, err := s.Acquire(context.Background(), "job", c, redlimit.NewLeaseID()); err != nil || !l.Held {
				t.Fatalf("Acquire: %+v, %v", l, err)
			}
		}
	}
	cases := []struct {
		name  string
		extra []string
	}{
		{"restart, data lost", nil},
		{"restart, data kept", []string{"--appendonly", "yes", "--appendfsync", "always"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, tc.extra...)
			s := storeAt(t, srv.Addr())
			hold(t, s)
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			waitAllFree(t, s, "job", c, c.TTL+3*time.Second)
		})
	}
	t.Run("failover", func(t *testing.T) {
		c := redlimit.InFlight(4, 4*time.Second)
		master := redistest.Start(t)
		replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
		ms := storeAt(t, master.Addr())
		held := time.Now()
		for range c.Slots {
			if l, err := ms.Acquire(context.Background(), "job", c, redlimit.NewLeaseID()); err != nil || !l.Held {
				t.Fatalf("Acquire: %+v, %v", l, err)
			}
		}
		if err := master.WaitReplicated(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := master.Kill(); err != nil {
			t.Fatal(err)
		}
		if _, err := replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
			t.Fatal(err)
		}
		s := storeAt(t, replica.Addr())
		l, err := s.Acquire(context.Background(), "job", c, "early")
		if err != nil || l.Held && time.Since(held) < c.TTL {
			t.Fatalf("the replica lost the leases after %v: %+v, %v", time.Since(held), l, err)
		}
		waitAllFree(t, s, "job", c, c.TTL+3*time.Second)
	})
}
