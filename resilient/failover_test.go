package resilient_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// TestFaultFailoverLosesWrites measures what a promoted replica has lost:
// writes acknowledged under load to a master SIGKILLed, counted after the
// failover on the replica that took its place. Replication is
// asynchronous, so the loss is what the master had acknowledged and not yet
// sent; the test only bounds it by what was acknowledged in the last
// second before the kill (the replica's link is kept up to date within
// milliseconds on loopback).
func TestFaultFailoverLosesWrites(t *testing.T) {
	redistest.Exclusive(t)
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: time.Second})
	// The store's clock stands still in the middle of an hour: an hour's
	// fixed window that began a new window during the run (the real clock
	// passing the hour) counted only the writes after it, and the test
	// took the others for lost (it failed so at 01:00 UTC).
	mid := time.Unix(1_700_000_000, 0) // 800 s into its hour
	store := redisStore(t, cluster.Addrs(), redisstore.WithClock(func() time.Time { return mid }))
	lim := redlimit.Per(1<<40, time.Hour).FixedWindow()
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprint("w", i)
	}
	victim, err := cluster.MasterFor("{" + keys[0] + "}")
	if err != nil {
		t.Fatal(err)
	}
	onVictim := map[string]bool{}
	for _, k := range keys {
		m, err := cluster.MasterFor("{" + k + "}")
		if err != nil {
			t.Fatal(err)
		}
		onVictim[k] = m == victim
	}
	var mu sync.Mutex
	var killed time.Time // set under mu when the kill begins
	acked := map[string]int64{}
	ackedAfter := map[string]int64{} // of acked, those acknowledged after the kill began
	var ackTimes []time.Time         // of the victim's keys
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := keys[(w+i)%len(keys)]
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				r, err := store.Allow(ctx, k, lim)
				cancel()
				if err == nil && r.Allowed {
					mu.Lock()
					acked[k]++
					if !killed.IsZero() {
						ackedAfter[k]++
					}
					if onVictim[k] {
						ackTimes = append(ackTimes, time.Now())
					}
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(time.Second)
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	close(done)
	wg.Wait()

	var lost, ackedVictim, lastSecond int64
	for _, k := range keys {
		if !onVictim[k] {
			continue
		}
		r, err := store.Peek(context.Background(), k, lim, 1)
		if err != nil {
			t.Fatalf("%s after the failover: %v", k, err)
		}
		counted := lim.Count - 1 - r.Remaining // Peek's Remaining is after one more
		ackedVictim += acked[k]
		lost += max(0, acked[k]-counted)
		t.Logf("%s: %d acknowledged (%d after the kill began), %d counted after the failover", k, acked[k], ackedAfter[k], counted)
	}
	for _, at := range ackTimes {
		if at.Before(killed) && killed.Sub(at) <= time.Second {
			lastSecond++
		}
	}
	if lastSecond == 0 {
		t.Fatal("no write acknowledged on the victim in the second before the kill")
	}
	rate := float64(lastSecond) // per second
	t.Logf("failover: %d writes lost of %d acknowledged on the killed master's keys (%.0f/s before the kill: %.2f ms of them)", lost, ackedVictim, rate, float64(lost)/rate*1000)
	report(t, "failover", "| %d | %.0f | %d | %.2f ms |", ackedVictim, rate, lost, float64(lost)/rate*1000)
	if lost > lastSecond {
		t.Errorf("%d writes lost, more than the last second's %d", lost, lastSecond)
	}
}

// TestFaultWaitCost measures what WAIT 1 (one replica acknowledges) costs
// after each decision on a master with one replica, on loopback: the
// latency of one caller's decisions, and the throughput of 32.
func TestFaultWaitCost(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	if !waitFor(10*time.Second, func() bool {
		info, err := replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	}) {
		t.Fatal("the replica's link never came up")
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{master.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	lim := redlimit.Per(1<<40, time.Hour).SlidingWindow()
	decide := func(wait bool) error {
		ctx := context.Background()
		if _, err := store.Allow(ctx, "k", lim); err != nil {
			return err
		}
		if wait {
			n, err := c.Do(ctx, c.B().Wait().Numreplicas(1).Timeout(100).Build()).AsInt64()
			if err == nil && n < 1 {
				err = fmt.Errorf("WAIT: %d replicas", n)
			}
			return err
		}
		return nil
	}
	for _, wait := range []bool{false, true} {
		var lat []time.Duration
		for range 2000 {
			start := time.Now()
			if err := decide(wait); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		var n sync.WaitGroup
		var mu sync.Mutex
		total := 0
		end := time.Now().Add(time.Second)
		for range 32 {
			n.Go(func() {
				k := 0
				for time.Now().Before(end) {
					if err := decide(wait); err != nil {
						t.Error(err)
						return
					}
					k++
				}
				mu.Lock()
				total += k
				mu.Unlock()
			})
		}
		n.Wait()
		name := "decision"
		if wait {
			name = "decision + WAIT 1 100"
		}
		t.Logf("%s: p50 %s, p99 %s, %d/s with 32 callers", name, lat[len(lat)/2], lat[len(lat)*99/100], total)
		report(t, "wait", "| %s | %s | %s | %d |", name, lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), total)
	}
}
