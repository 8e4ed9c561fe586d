package resilient_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// TestFaultClusterMasterKilled kills a master of a 3+3 cluster under load
// and measures the failover as the callers see it.
func TestFaultClusterMasterKilled(t *testing.T) {
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: time.Second})
	const nodes = 4 // the local share is sized as if 4 nodes shared the limit
	lim := redlimit.Per(3000, time.Hour).SlidingWindow()
	share := int((lim.Count + nodes - 1) / nodes)
	l, err := resilient.New(redisStore(t, cluster.Addrs()), resilient.Options{Nodes: fixedNodes(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
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

	stop := load(l, faultWorkers, keys, lim)
	time.Sleep(500 * time.Millisecond)
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(6 * time.Second)
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
	admitted := map[string]int{}
	for _, s := range all {
		if s.allowed {
			admitted[s.key]++
		}
	}
	excess, excessVictim := 0, 0
	for _, k := range keys {
		over := max(0, admitted[k]-int(lim.Count))
		excess += over
		if onVictim[k] {
			excessVictim += over
		}
		// The local share, plus what was in flight, bounds the excess of
		// one node.
		if over > share+faultWorkers {
			t.Errorf("key %s: %d admitted, %d above the limit of %d (local share %d)", k, admitted[k], over, lim.Count, share)
		}
	}
	during := between(all, killed, killed.Add(failover))
	report(t, "cluster", "| %d | %d | %s | %s | %d | %d | %d |",
		len(all), len(during), failover.Round(10*time.Millisecond), p99(during).Round(time.Microsecond), excess, excessVictim, errs)
	if p := p99(during); p > faultP99 {
		t.Errorf("p99 latency during the failover %s, want at most %s", p, faultP99)
	}
}
