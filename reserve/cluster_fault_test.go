package reserve_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/reserve"
)

// TestSettleClusterPartialRefund settles reservations over three limits
// whose keys live on three Cluster masters, with one master refusing
// writes (NOREPLICAS: the refund certainly did not run) or paused (the
// refund may or may not have run until it resumes). The other two are given
// back exactly; the failed one is never given back twice, nor more than it
// took: it keeps its estimate (refused), or is given back once when its
// master resumes (paused). The error names the request not given back and
// wraps redisstore.ErrRefund; a second Settle returns ErrSettled, and the
// timeout never gives the estimate back on top.
func TestSettleClusterPartialRefund(t *testing.T) {
	t.Parallel()
	// A node timeout longer than any pause here: no failover.
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 10 * time.Second})
	ids, masters, err := cluster.DistinctMasters(3)
	if err != nil {
		t.Fatal(err)
	}
	clock, ledgerClock := newClock(), newClock()
	s := redisStore(t, cluster.Addrs(), uniq(), clock.Now)
	l := newLedger(t, s, reserve.Options{Now: ledgerClock.Now, Timeout: time.Minute, CallTimeout: time.Second})
	for n, c := range []struct {
		name        string
		fail, mend  func(*redistest.Server) error
		afterMend   int64 // what the failed key has used once its master is well
		description string
	}{{
		name: "refused",
		fail: func(m *redistest.Server) error {
			_, err := m.Do("CONFIG", "SET", "min-replicas-to-write", "5")
			return err
		},
		mend: func(m *redistest.Server) error {
			_, err := m.Do("CONFIG", "SET", "min-replicas-to-write", "0")
			return err
		},
		afterMend:   100, // kept: the strict side
		description: "not applied",
	}, {
		name:        "paused",
		fail:        (*redistest.Server).Pause,
		mend:        (*redistest.Server).Resume,
		afterMend:   40, // the refund sent before the pause runs, once
		description: "may still be applied",
	}} {
		for victim := range ids {
			t.Run(fmt.Sprint(c.name, "/", victim), func(t *testing.T) {
				// The identifiers are the keys (their hash tags pick the
				// masters): a period of the case's own gives it states of
				// its own.
				keys := ids
				caseLim := redlimit.Per(1000, time.Hour+time.Duration(10*n+victim)*time.Millisecond).FixedWindow()
				var reqs []redlimit.Request
				for _, k := range keys {
					reqs = append(reqs, redlimit.Request{Key: k, Limit: caseLim, Cost: 100})
				}
				r, err := l.ReserveAll(t.Context(), reqs)
				if err != nil || !r.OK() {
					t.Fatalf("reserve: %v, %v", r, err)
				}
				if err := c.fail(masters[victim]); err != nil {
					t.Fatal(err)
				}
				mended := false
				mend := func() {
					if !mended {
						mended = true
						if err := c.mend(masters[victim]); err != nil {
							t.Fatal(err)
						}
					}
				}
				defer mend()
				start := time.Now()
				err = r.Settle(t.Context(), 40)
				t.Logf("settle: %s: %v", time.Since(start).Round(time.Millisecond), err)
				if !errors.Is(err, redisstore.ErrRefund) || !strings.Contains(err.Error(), fmt.Sprintf("requests [%d]", victim)) || !strings.Contains(err.Error(), c.description) {
					t.Errorf("settle: %v; want ErrRefund naming request %d, %q", err, victim, c.description)
				}
				for i, k := range keys {
					if i == victim {
						continue
					}
					if got := used(t, s, k, caseLim); got != 40 {
						t.Errorf("%s (on a healthy master): %d used, want 40", k, got)
					}
				}
				mend()
				// The paused node runs the refund it was sent when it
				// resumes; wait for it.
				want := c.afterMend
				deadline := time.Now().Add(5 * time.Second)
				for used(t, s, keys[victim], caseLim) != want && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if err := r.Settle(t.Context(), 40); !errors.Is(err, reserve.ErrSettled) {
					t.Errorf("a second settle: %v, want ErrSettled", err)
				}
				ledgerClock.Advance(2 * time.Minute)
				l.ReleaseExpired()
				if err := r.Release(t.Context()); err != nil {
					t.Error(err)
				}
				time.Sleep(50 * time.Millisecond)
				for i, k := range keys {
					want := int64(40)
					if i == victim {
						want = c.afterMend
					}
					if got := used(t, s, k, caseLim); got != want {
						t.Errorf("%s: %d used at the end, want %d", k, got, want)
					}
				}
				if n := l.Pending(); n != 0 {
					t.Errorf("%d pending", n)
				}
			})
		}
	}
}

// TestSettleClusterPartialDebit settles above the estimate over three
// masters, one refusing writes, and one key's debit taking it into debt:
// that debit made the decision a denial, in which the refused master's
// limit came back Undecided with no error, and Settle returned nil with
// that debit never counted. The error names the request not debited.
func TestSettleClusterPartialDebit(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 10 * time.Second})
	ids, masters, err := cluster.DistinctMasters(3)
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	s := redisStore(t, cluster.Addrs(), uniq(), clock.Now)
	l := newLedger(t, s, reserve.Options{Now: clock.Now, CallTimeout: time.Second})
	lim := redlimit.PerHour(1000).FixedWindow()
	var reqs []redlimit.Request
	for _, id := range ids {
		reqs = append(reqs, redlimit.Request{Key: id, Limit: lim, Cost: 100})
	}
	r, err := l.ReserveAll(t.Context(), reqs)
	if err != nil || !r.OK() {
		t.Fatalf("reserve: %v, %v", r, err)
	}
	if _, err := masters[1].Do("CONFIG", "SET", "min-replicas-to-write", "5"); err != nil {
		t.Fatal(err)
	}
	err = r.SettleEach(t.Context(), []int64{5000, 150, 150})
	if _, err := masters[1].Do("CONFIG", "SET", "min-replicas-to-write", "0"); err != nil {
		t.Fatal(err)
	}
	t.Logf("settle: %v", err)
	if !errors.Is(err, reserve.ErrNotDebited) || !strings.Contains(err.Error(), "requests [1]") {
		t.Errorf("settle: %v; want an error naming request 1, not debited", err)
	}
	for i, want := range []int64{1000, 100, 150} {
		if got := used(t, s, ids[i], lim); got != want {
			t.Errorf("%s: %d used, want %d", ids[i], got, want)
		}
	}
}
