package resilient_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestFaultClusterMasterKilled kills a master of a 3+3 cluster under load
// from faultNodes nodes and measures the failover as the callers see it.
func TestFaultClusterMasterKilled(t *testing.T) {
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: time.Second})
	lim := redlimit.Per(3000, time.Hour).SlidingWindow()
	share := int((lim.Count + faultNodes - 1) / faultNodes)
	nodes, _ := startNodes(t, cluster.Addrs(), faultNodes)
	defer func() {
		for _, l := range nodes {
			l.Close()
		}
	}()
	keys := make([]string, 12)
	limits := map[string]redlimit.Limit{}
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		limits[keys[i]] = lim
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

	stop := loadNodes(asLimiters(nodes), loadSpec{workers: faultWorkers, keys: keys, limits: limits})
	time.Sleep(500 * time.Millisecond)
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(6 * time.Second)
	charged, unconfirmed := waitReconciled(t, nodes)
	time.Sleep(200 * time.Millisecond)
	all := stop()

	errs := count(all, func(s sample) bool { return s.err != nil })
	if errs > 0 {
		t.Errorf("%d decisions returned an error", errs)
	}
	failover := firstFromStore(all, killed.Add(100*time.Millisecond), func(s sample) bool { return onVictim[s.key] })
	if failover < 0 {
		t.Fatalf("the killed master's keys never came back to Redis")
	}
	local := count(all, func(s sample) bool { return s.source == redlimit.FromLocal })
	if local == 0 {
		t.Errorf("no decision went to the local fallback during the failover")
	}
	untilEnd := between(all, time.Time{}, killed.Add(failover))
	excess, excessEnd, excessVictimEnd := 0, 0, 0
	var perKey []string
	for _, k := range keys {
		over, overEnd := aboveLimit(all, k, lim), aboveLimit(untilEnd, k, lim)
		excess += over
		excessEnd += overEnd
		if onVictim[k] {
			perKey = append(perKey, fmt.Sprintf("%s %d (killed master's)", k, over))
		} else {
			perKey = append(perKey, fmt.Sprintf("%s %d", k, over))
		}
		// Once the nodes have charged Redis what they admitted by
		// themselves, the rest of the window admits no more than Redis
		// had left: at most 10% above the limit, on the killed master's
		// keys too: a node charges a state's debt before the store
		// decides the state again, and holds its other calls for the
		// state meanwhile (see docs/RELIABILITY.md).
		bound := int(lim.Count) / faultExcess
		if over > bound {
			t.Errorf("key %s (on the killed master: %v): %d admitted above the limit of %d by the end of the run (local share %d), want at most %d", k, onVictim[k], over, lim.Count, share, bound)
		}
		if onVictim[k] {
			excessVictimEnd += overEnd
			// The killed master's keys are decided locally throughout
			// the failover: what the nodes last heard from Redis bounds
			// them, up to what was in flight and the rounding of each
			// node's part, and what was admitted locally before the kill
			// (a call slower than the deadline on a busy machine), which
			// Redis was not told.
			before := count(all, func(s sample) bool {
				return s.key == k && s.allowed && s.source == redlimit.FromLocal && s.start.Before(killed)
			})
			if overEnd > faultWorkers+faultNodes+before {
				t.Errorf("key %s (on the killed master): %d admitted above the limit of %d by the end of the failover", k, overEnd, lim.Count)
			}
		}
	}
	t.Logf("above the limit by the end of the run, per key: %s", strings.Join(perKey, ", "))
	// When each node's decisions of the killed master's keys came back to
	// Redis, and what Redis and the local fallbacks admitted of them
	// from then on: a node's charges reach Redis with its first call,
	// and until the last node's have, Redis decides without theirs.
	var back []string
	for i := range nodes {
		d := firstFromStore(all, killed.Add(100*time.Millisecond), func(s sample) bool { return s.node == i && onVictim[s.key] })
		back = append(back, d.Round(time.Millisecond).String())
	}
	after := between(all, killed.Add(failover), time.Now())
	t.Logf("the killed master's keys back on Redis, per node: %s; admitted after the first: %d by Redis, %d locally",
		strings.Join(back, ", "),
		count(after, func(s sample) bool { return onVictim[s.key] && s.allowed && s.source == redlimit.FromStore }),
		count(after, func(s sample) bool { return onVictim[s.key] && s.allowed && s.source == redlimit.FromLocal }))
	during := between(all, killed, killed.Add(failover))
	report(t, "cluster", "| %d | %d | %s | %s | %d | %d | %d | %d / %d | %d |",
		len(all), len(during), failover.Round(10*time.Millisecond), p99(during).Round(time.Microsecond), excessEnd, excessVictimEnd, excess, charged, unconfirmed, errs)
	if p := p99(during); p > faultP99 {
		t.Errorf("p99 latency during the failover %s, want at most %s", p, faultP99)
	}
}
