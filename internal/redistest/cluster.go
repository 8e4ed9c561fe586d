package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	numSlots           = 16384
	clusterWaitTimeout = 30 * time.Second
)

// ClusterOptions configures StartCluster and NewCluster.
type ClusterOptions struct {
	Masters           int           // 0 means 3 (redis-cli needs at least 3)
	ReplicasPerMaster int           // 0 means 1; use -1 for none
	NodeTimeout       time.Duration // cluster-node-timeout, 0 means 1000ms
}

// Cluster is a Redis Cluster of masters+replicas processes on loopback.
type Cluster struct {
	nodes []*Server

	mu          sync.Mutex
	lastMasters []*Server
	stopOnce    sync.Once
}

// Addrs returns the address of every node, masters and replicas.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns every node of the cluster, in creation order.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Stop stops every node and removes their temp dirs. It is idempotent.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.Stop()
			}()
		}
		wg.Wait()
	})
}

// StartCluster starts a cluster (see NewCluster) that is stopped by
// tb.Cleanup. If it cannot be started, StartCluster calls tb.Fatalf.
func StartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c, err := NewCluster(opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// NewCluster starts Masters*(1+ReplicasPerMaster) cluster-enabled
// redis-server processes. It joins them with `redis-cli --cluster create`.
// It waits, up to 30 s, until the cluster is healthy. Then every
// node has cluster_state:ok, all 16384 slots are assigned, and every
// replica's link to its master is up. The caller must call Stop.
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	_, cli, err := binaries()
	if err != nil {
		return nil, err
	}
	masters := opts.Masters
	if masters == 0 {
		masters = 3
	}
	replicas := opts.ReplicasPerMaster
	switch {
	case replicas == 0:
		replicas = 1
	case replicas < 0:
		replicas = 0
	}
	timeout := opts.NodeTimeout
	if timeout == 0 {
		timeout = 1000 * time.Millisecond
	}
	if masters < 3 {
		return nil, fmt.Errorf("redistest: redis-cli --cluster create needs at least 3 masters, got %d", masters)
	}
	n := masters * (1 + replicas)
	flags := []string{
		"--cluster-enabled", "yes",
		"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10),
		"--appendonly", "no",
		// Replicas sync right away instead of waiting 5s for others.
		"--repl-diskless-sync-delay", "0",
		// Replicas always try to fail over, however stale their data.
		"--cluster-replica-validity-factor", "0",
	}

	c := &Cluster{nodes: make([]*Server, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = startServer(true, flags)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stopStarted()
		return nil, err
	}

	start := time.Now()
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli %s failed after %v: %v\n%s",
			strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out)
	}
	if err := c.WaitHealthy(clusterWaitTimeout - time.Since(start)); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: cluster of %d nodes not ready %v after redis-cli --cluster create: %w",
			n, time.Since(start).Round(time.Millisecond), err)
	}
	return c, nil
}

// stopStarted stops the nodes that did start after a partial failure.
func (c *Cluster) stopStarted() {
	var started []*Server
	for _, n := range c.nodes {
		if n != nil {
			started = append(started, n)
		}
	}
	c.nodes = started
	c.Stop()
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id     string
	addr   string // ip:port
	flags  map[string]bool
	master string // master id for replicas, "-" for masters
	slots  [][2]int
}

func (n clusterNode) isMaster() bool { return n.flags["master"] }
func (n clusterNode) failing() bool  { return n.flags["fail"] || n.flags["fail?"] }

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// parseClusterNodes parses a CLUSTER NODES reply.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("redistest: bad CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		n := clusterNode{id: f[0], addr: addr, flags: map[string]bool{}, master: f[3]}
		for _, fl := range strings.Split(f[2], ",") {
			n.flags[fl] = true
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // migrating/importing slot
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("redistest: bad slot %q in CLUSTER NODES line %q", s, line)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("redistest: bad slot %q in CLUSTER NODES line %q", s, line)
				}
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// clusterView returns node s's parsed CLUSTER NODES.
func (s *Server) clusterView() ([]clusterNode, error) {
	text, err := s.quickDo("CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(text)
}

// byAddr returns the cluster's server with the given address.
func (c *Cluster) byAddr(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// liveNodes returns the nodes that are running and not paused.
func (c *Cluster) liveNodes() []*Server {
	var live []*Server
	for _, n := range c.nodes {
		if n.live() {
			live = append(live, n)
		}
	}
	return live
}

// slotMasters returns the masters that serve slots in view, ordered by
// their first slot.
func slotMasters(view []clusterNode) []clusterNode {
	var ms []clusterNode
	for _, n := range view {
		if n.isMaster() && !n.flags["fail"] && len(n.slots) > 0 {
			ms = append(ms, n)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].slots[0][0] < ms[j].slots[0][0] })
	return ms
}

// Masters returns the masters currently serving slots, ordered by their
// first slot, as seen in CLUSTER NODES of the first node that answers. If
// no node answers, it returns the masters seen last time.
func (c *Cluster) Masters() []*Server {
	for _, n := range c.liveNodes() {
		view, err := n.clusterView()
		if err != nil {
			continue
		}
		var ms []*Server
		for _, m := range slotMasters(view) {
			if s := c.byAddr(m.addr); s != nil {
				ms = append(ms, s)
			}
		}
		c.mu.Lock()
		c.lastMasters = ms
		c.mu.Unlock()
		return append([]*Server(nil), ms...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.lastMasters...)
}

// MasterFor returns the node currently serving key's slot: the slot comes
// from CLUSTER KEYSLOT and its owner from CLUSTER NODES, confirmed by the
// owner's own view.
func (c *Cluster) MasterFor(key string) (*Server, error) {
	var errs []error
	for _, n := range c.liveNodes() {
		reply, err := n.quickDo("CLUSTER", "KEYSLOT", key)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: CLUSTER KEYSLOT: %w", n.Addr(), err))
			continue
		}
		slot, err := strconv.Atoi(reply)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: bad CLUSTER KEYSLOT reply %q", n.Addr(), reply))
			continue
		}
		view, err := n.clusterView()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err))
			continue
		}
		for _, m := range slotMasters(view) {
			if !m.owns(slot) {
				continue
			}
			owner := c.byAddr(m.addr)
			if owner == nil || !owner.live() {
				errs = append(errs, fmt.Errorf("%s: slot %d owner %s is not a running node", n.Addr(), slot, m.addr))
				break
			}
			if ov, err := owner.clusterView(); err == nil {
				for _, o := range ov {
					if o.flags["myself"] && o.isMaster() && o.owns(slot) {
						return owner, nil
					}
				}
			}
			errs = append(errs, fmt.Errorf("%s: slot %d owner %s does not claim it", n.Addr(), slot, m.addr))
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("redistest: no running node serves key %q", key)
	}
	return nil, fmt.Errorf("redistest: no master found for key %q: %w", key, errors.Join(errs...))
}

// DistinctMasters returns n identifiers ("id0", "id1", ...) whose hash tags
// ("{id0}") are served by n distinct masters, and those masters.
func (c *Cluster) DistinctMasters(n int) ([]string, []*Server, error) {
	var ids []string
	var masters []*Server
	for i := 0; len(ids) < n && i < 1000; i++ {
		id := fmt.Sprint("id", i)
		m, err := c.MasterFor("{" + id + "}")
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(masters, m) {
			ids, masters = append(ids, id), append(masters, m)
		}
	}
	if len(ids) < n {
		return nil, nil, fmt.Errorf("redistest: found %d identifiers on distinct masters, want %d", len(ids), n)
	}
	return ids, masters, nil
}

// WaitHealthy waits until the running (not paused) nodes are healthy.
// Each reports cluster_state:ok with all 16384 slots assigned and ok. All
// agree on which master serves which slots. None is flagged as failing.
// Every running replica's link to its master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	start := time.Now()
	if problem := waitUntil(timeout, c.health); problem != nil {
		return fmt.Errorf("redistest: cluster not healthy after %v: %w", time.Since(start).Round(time.Millisecond), problem)
	}
	return nil
}

// health returns nil if the cluster is healthy, else what is wrong.
func (c *Cluster) health() error {
	live := c.liveNodes()
	if len(live) == 0 {
		return errors.New("no running nodes")
	}
	liveAddr := map[string]bool{}
	for _, n := range live {
		liveAddr[n.Addr()] = true
	}
	var refLayout, refAddr string
	for _, n := range live {
		info, err := n.quickDo("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr(), err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.Addr(), st)
		}
		for _, f := range []string{"cluster_slots_assigned", "cluster_slots_ok"} {
			if v := infoField(info, f); v != strconv.Itoa(numSlots) {
				return fmt.Errorf("%s: %s:%s", n.Addr(), f, v)
			}
		}
		view, err := n.clusterView()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err)
		}
		var layout []string
		for _, m := range slotMasters(view) {
			layout = append(layout, fmt.Sprintf("%s%v", m.addr, m.slots))
		}
		if l := strings.Join(layout, " "); refAddr == "" {
			refLayout, refAddr = l, n.Addr()
		} else if l != refLayout {
			return fmt.Errorf("nodes disagree on slot owners: %s sees [%s], %s sees [%s]", refAddr, refLayout, n.Addr(), l)
		}
		for _, v := range view {
			if liveAddr[v.addr] && v.failing() {
				return fmt.Errorf("%s flags running node %s as failing", n.Addr(), v.addr)
			}
			if v.flags["myself"] && v.flags["slave"] {
				repl, err := n.quickDo("INFO", "replication")
				if err != nil {
					return fmt.Errorf("%s: INFO replication: %w", n.Addr(), err)
				}
				if st := infoField(repl, "master_link_status"); st != "up" {
					return fmt.Errorf("%s: replica master_link_status:%s", n.Addr(), st)
				}
			}
		}
	}
	return nil
}

// nodesConf is the cluster config file of a node.
func (s *Server) nodesConf() string { return filepath.Join(s.dir, "nodes.conf") }
