package resilient_test

import (
	"context"
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
	redistest.Exclusive(t)
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: time.Second})
	lim := redlimit.Per(3000, time.Hour).SlidingWindow()
	share := int((lim.Count + faultNodes - 1) / faultNodes)
	nodes, breakers := startNodes(t, cluster.Addrs(), faultNodes)
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

	// "spent", on the killed master, exhausted before the load: it admits
	// nothing, before, during or after the failover.
	spentLim := redlimit.Per(500, time.Hour).SlidingWindow()
	spent := ""
	for i := 0; spent == ""; i++ {
		m, err := cluster.MasterFor(fmt.Sprint("{spent", i, "}"))
		if err != nil {
			t.Fatal(err)
		}
		if m == victim {
			spent = fmt.Sprint("spent", i)
		}
	}
	if r, err := nodes[0].AllowN(context.Background(), spent, spentLim, spentLim.Count); err != nil || !r.Allowed {
		t.Fatalf("exhausting %s: %+v, %v", spent, r, err)
	}
	if err := victim.WaitReplicated(5 * time.Second); err != nil { // its replica has it before the kill
		t.Fatal(err)
	}
	limits[spent] = spentLim
	stop := loadNodes(asLimiters(nodes), loadSpec{workers: faultWorkers, keys: append(keys[:len(keys):len(keys)], spent), limits: limits})
	// The kill comes with a quarter of the killed master's keys' limit
	// used (warmUp), however fast this machine decides: they are decided
	// locally, then by Redis, well under their limit.
	warmUp(nodes[0], keys[0], lim, 500*time.Millisecond)
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	hostLate := lateness()
	time.Sleep(6 * time.Second)
	late := hostLate()
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
	if n := count(all, func(s sample) bool { return s.key == spent && s.allowed }); n != 0 {
		t.Errorf("%s, exhausted before the load, admitted %d", spent, n)
	}
	local := count(all, func(s sample) bool { return s.source == redlimit.FromLocal })
	if local == 0 {
		t.Errorf("no decision went to the local fallback during the failover")
	}
	untilEnd := between(all, time.Time{}, killed.Add(failover))
	// What Redis counts for each key, against what was admitted, by Redis
	// or locally (and charged): a count below that sum is admissions the
	// promoted replica never received, writes the killed master had
	// acknowledged and not yet sent (TestFaultFailoverLosesWrites), if the
	// nodes charged all they owed. (A count above it is calls cut off at
	// their deadline that Redis ran afterwards.)
	var counts []string
	lost := map[string]int{}
	for _, k := range keys {
		whole := lim
		whole.Count = redlimit.MaxCount
		r, err := nodes[0].Peek(context.Background(), k, whole, 1)
		if err != nil || r.Source != redlimit.FromStore {
			t.Logf("reading %s's count: %+v, %v", k, r, err)
			continue
		}
		admitted := count(all, func(s sample) bool { return s.key == k && s.allowed })
		counted := int(whole.Max() - 1 - r.Remaining)
		counts = append(counts, fmt.Sprintf("%s %d/%d", k, counted, admitted))
		if onVictim[k] && unconfirmed == 0 {
			lost[k] = max(0, admitted-counted)
		}
	}
	t.Logf("counted by Redis / admitted, per key: %s", strings.Join(counts, ", "))
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
		// had left: at most 10% above the limit. On the killed master's
		// keys, the nodes come back from the failover up to a second or
		// more apart, and Redis learns each node's debt from that node's
		// calls only: a node back first rejoins (Options.Fallback.Rejoin), held
		// to its share until the others are back, so Redis does not
		// give it what the others admitted by themselves (see
		// docs/RELIABILITY.md).
		// The writes the failover lost are Redis's, not redlimit's: a
		// loaded host once lost 459 of a key's admissions.
		bound := int(lim.Count)/faultExcess + lost[k]
		if over > bound {
			t.Errorf("key %s (on the killed master: %v): %d admitted above the limit of %d by the end of the run (local share %d), want at most %d (%d of them lost by the failover)", k, onVictim[k], over, lim.Count, share, bound, lost[k])
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
	// When each node's decisions of each of the killed master's keys
	// came back to Redis (after the node's charge of the key), and what
	// Redis admitted of the key after the first node was back, before and
	// after the last one was: until then, Redis decides without the debt
	// of the nodes not back yet.
	var back []string
	for _, k := range keys {
		if !onVictim[k] {
			continue
		}
		first, last := time.Duration(-1), time.Duration(0)
		for i := range nodes {
			d := firstFromStore(all, killed.Add(100*time.Millisecond), func(s sample) bool { return s.node == i && s.key == k })
			if first < 0 || d < first {
				first = d
			}
			last = max(last, d)
		}
		fromRedis := func(from, to time.Time) int {
			return count(between(all, from, to), func(s sample) bool { return s.key == k && s.allowed && s.source == redlimit.FromStore })
		}
		locally := count(between(all, killed.Add(first), time.Now()), func(s sample) bool { return s.key == k && s.allowed && s.source == redlimit.FromLocal })
		back = append(back, fmt.Sprintf("%s: nodes back from %s to %s, %d admitted by Redis before the last, %d after, %d locally after the first",
			k, first.Round(time.Millisecond), last.Round(time.Millisecond), fromRedis(killed.Add(first), killed.Add(last)), fromRedis(killed.Add(last), time.Now()), locally))
	}
	t.Logf("the killed master's keys back on Redis: %s", strings.Join(back, "; "))
	var opened []string
	for _, b := range breakers {
		n, after := 0, 0
		for _, e := range b.states() {
			if e.state == "open" && e.at.After(killed) {
				n++
				if e.at.After(killed.Add(failover)) {
					after++
				}
			}
		}
		opened = append(opened, fmt.Sprintf("%d (%d after the failover)", n, after))
	}
	t.Logf("breaker opened after the kill, per node: %s", strings.Join(opened, ", "))
	during := between(all, killed, killed.Add(failover))
	report(t, "cluster", "| %d | %d | %s | %s | %d | %d | %d | %d / %d | %d |",
		len(all), len(during), failover.Round(10*time.Millisecond), p99(during).Round(time.Microsecond), excessEnd, excessVictimEnd, excess, charged, unconfirmed, errs)
	if p := p99(during); p > faultP99+late {
		t.Errorf("p99 latency during the failover %s, want at most %s and the host's p99 lateness %s", p, faultP99, late)
	}
}
