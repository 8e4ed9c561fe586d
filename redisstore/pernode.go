package redisstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Batches of a Redis Cluster node.
//
// A batch on Cluster takes the decisions of one node, whatever their
// slots. It is one script call, sent to the node by its address. The
// client does not route it, and follows no redirection for it. The call
// has Redis 7's allow-cross-slot-keys flag and the keys in ARGV. Before
// the script runs, Redis checks only the keys declared in KEYS, all of one
// slot. It checks every other key when the script touches it. A script
// that fails halfway keeps what it wrote. So the batch script first reads
// every key (lua/batch.lua). If the node does not serve one, it answers
// NOTOWNED having written nothing. The batch is then decided again slot by
// slot (sendBatch). Each slot's decisions go in one call routed by the
// client, with their keys in KEYS. The view of which node serves which
// slot is then refreshed. A stale view costs these second calls, never a
// decision.
//
// Why this is safe while slots move or nodes fail over:
//   - A script runs atomically. No slot changes owner and no key migrates
//     while it runs. So what the first reads found holds for the whole
//     script.
//   - A node serves a key when it owns the key's slot. It also serves a
//     key still there while the slot migrates away. MIGRATE moves a key
//     with its state, atomically. A node refuses a key of a slot it does
//     not own, and of a slot it is importing. The call, sent straight to
//     the node, never carries ASKING. With ASKING, a node would serve an
//     importing slot's keys even while they live on the other node. A key
//     migrating away that is gone from the node is refused as well.
//     Either way the batch writes nothing and goes again slot by slot.
//     There the client follows MOVED and ASK for keys Redis checks itself.
//   - A node that became a replica (failover) refuses a script that may
//     write, before it runs. An old master cut off from the others keeps
//     serving its slots until cluster-node-timeout, as for calls of one
//     slot. A master may fail after running a batch, before its replica
//     got it. The batch is then lost as its decisions alone would be: no
//     more, no less.
//   - Servers before Redis 7 know no allow-cross-slot-keys: their slots
//     are batched slot by slot.

// WithNodeBatches turns batches of several slots on one Redis Cluster
// node on (the default) or off. Off, a Cluster's batches are each of one
// slot, with every key declared in KEYS. That suits a proxy or an ACL
// that refuses scripts touching keys they do not declare. It has no effect
// without batching or off Cluster.
func WithNodeBatches(on bool) Option {
	return func(s *Store) error {
		s.noNodeBatches = !on
		return nil
	}
}

// nodeBackend is what a Cluster backend offers for batches of one node.
type nodeBackend interface {
	// slotOwners returns the address of the master of every slot
	// (numSlots of them; "" where unknown), as the client sees it or as
	// the Cluster says (CLUSTER SLOTS).
	slotOwners(ctx context.Context) ([]string, error)
	// evalOn runs a script on the node addr, without following
	// redirections.
	evalOn(ctx context.Context, addr string, sc script, keys, args []string) ([]int64, error)
	// version returns the major version of the Redis server at addr.
	version(ctx context.Context, addr string) (int, error)
}

// How often the view of the Cluster is refreshed: at least every
// topologyMaxAge while decisions use it, and when a batch finds it stale,
// but not twice within topologyMinGap.
const (
	topologyMaxAge  = 5 * time.Second
	topologyMinGap  = 100 * time.Millisecond
	topologyTimeout = 2 * time.Second
)

// nodeRouter keeps the Store's view of the Cluster: the batcher of every
// slot's node, for the nodes that take batches of several slots.
type nodeRouter struct {
	s  *Store
	nb nodeBackend

	topo atomic.Pointer[topology]

	mu         sync.Mutex
	byAddr     map[string]*batcher // the nodes' batchers, kept across views
	versions   map[string]int      // the nodes' major versions, as asked
	refreshing bool
	last       time.Time // when the last refresh started

	fallbacks atomic.Int64 // batches decided again slot by slot
}

// topology is one view of the Cluster: owner[slot] is the batcher of the
// slot's node, or nil to batch the slot alone.
type topology struct {
	at    time.Time
	owner [numSlots]*batcher
}

func newNodeRouter(s *Store, nb nodeBackend) *nodeRouter {
	return &nodeRouter{s: s, nb: nb, byAddr: map[string]*batcher{}, versions: map[string]int{}}
}

// of returns the batcher of slot's node, or nil for none (no view yet, or
// the node cannot take batches of several slots). It starts a refresh of
// a view that is missing or old.
func (r *nodeRouter) of(slot int) *batcher {
	t := r.topo.Load()
	if t == nil || time.Since(t.at) > topologyMaxAge {
		r.refreshSoon()
	}
	if t == nil {
		return nil
	}
	return t.owner[slot]
}

// refreshSoon refreshes the view in the background, unless a refresh is
// running or started less than topologyMinGap ago.
func (r *nodeRouter) refreshSoon() {
	r.mu.Lock()
	if r.refreshing || time.Since(r.last) < topologyMinGap {
		r.mu.Unlock()
		return
	}
	r.refreshing, r.last = true, time.Now()
	r.mu.Unlock()
	r.s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
		defer cancel()
		r.load(ctx)
		r.mu.Lock()
		r.refreshing = false
		r.mu.Unlock()
	})
}

// refresh loads a view now.
func (r *nodeRouter) refresh(ctx context.Context) {
	r.mu.Lock()
	r.last = time.Now()
	r.mu.Unlock()
	r.load(ctx)
}

// load asks the backend which node serves each slot, and each node new to
// the Store for its version, and makes that the view. On an error the old
// view stays (its batches fall back slot by slot where it is wrong).
func (r *nodeRouter) load(ctx context.Context) {
	owners, err := r.nb.slotOwners(ctx)
	if err != nil || len(owners) != numSlots {
		return
	}
	r.mu.Lock()
	var ask []string
	for _, addr := range owners {
		if _, ok := r.versions[addr]; !ok && addr != "" && !slices.Contains(ask, addr) {
			ask = append(ask, addr)
		}
	}
	r.mu.Unlock()
	versions := make(map[string]int, len(ask))
	for _, addr := range ask {
		if v, err := r.nb.version(ctx, addr); err == nil {
			versions[addr] = v
		}
	}
	t := &topology{at: time.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.versions, versions)
	for slot, addr := range owners {
		v, ok := r.versions[addr]
		if !ok || v < 7 {
			continue // unknown, or before Redis 7: slot by slot
		}
		b := r.byAddr[addr]
		if b == nil {
			b = &batcher{s: r.s, node: addr}
			r.byAddr[addr] = b
		}
		t.owner[slot] = b
	}
	r.topo.Store(t)
}

// sendBatch decides batch (see decideBatch) at the time at and fills each
// decision's out. On the Cluster node node (not ""), decisions of several
// slots go in one call to it. The node may not serve every key, or refuse
// the call. Then the batch is decided again slot by slot, the slots at
// once, and the view of the Cluster is refreshed. Without a node, a
// Cluster batch of several slots goes slot by slot.
func (s *Store) sendBatch(ctx context.Context, batch []*entry, at, node string) {
	if node != "" && (s.batchScriptAlways || !oneSlot(batch)) {
		err := s.decideBatch(ctx, batch, at, node)
		if err == nil || !movedAway(err) {
			setErr(batch, err)
			return
		}
		s.batches.nodes.fallbacks.Add(1)
		s.batches.nodes.refreshSoon()
	} else if !s.b.sharded() || oneSlot(batch) {
		s.decideSlotBatch(ctx, batch, at)
		return
	}
	var wg sync.WaitGroup
	for _, g := range bySlot(batch) {
		wg.Go(func() { s.decideSlotBatch(ctx, g, at) })
	}
	wg.Wait()
}

// decideSlotBatch decides batch, of one slot, in one call routed by its
// keys. While the slot migrates, Redis refuses a call of several keys of
// which only some have moved (TRYAGAIN). A client whose view of the slots
// is behind may see MOVED or ASK past its redirects. Neither runs the call
// (notApplied). The decisions then go each alone, as without batching. A
// single-limit decision has one key, which the client finds on either
// node.
func (s *Store) decideSlotBatch(ctx context.Context, batch []*entry, at string) {
	err := s.decideBatch(ctx, batch, at, "")
	if err == nil || len(batch) == 1 || !notApplied(err) {
		setErr(batch, err)
		return
	}
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Go(func() { p.out = s.decideAlone(ctx, p, at) })
	}
	wg.Wait()
}

// setErr gives every decision of batch the error err, if not nil.
func setErr(batch []*entry, err error) {
	if err == nil {
		return
	}
	for _, p := range batch {
		p.out = entryReply{err: err}
	}
}

// oneSlot reports whether every decision of batch is in one slot.
func oneSlot(batch []*entry) bool {
	for _, p := range batch[1:] {
		if p.slot != batch[0].slot {
			return false
		}
	}
	return true
}

// bySlot splits batch by slot, keeping the order within each slot.
func bySlot(batch []*entry) [][]*entry {
	var groups [][]*entry
	idx := map[int]int{}
	for _, p := range batch {
		i, ok := idx[p.slot]
		if !ok {
			i = len(groups)
			idx[p.slot] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

// errNoNode is the error of a call to a node the client does not know.
var errNoNode = errors.New("redisstore: no connection to the node")

// movedAway reports whether err shows that a batch sent to a node did not
// run. Either the node does not serve one of its keys (NOTOWNED from
// lua/batch.lua, or Redis's MOVED or ASK for KEYS[1]). Or it was refused
// without running (see notApplied). Deciding it again cannot apply it
// twice.
func movedAway(err error) bool {
	if errors.Is(err, errNoNode) || errors.Is(err, rueidis.ErrClosing) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	if notApplied(err) {
		return true
	}
	var rerr *rueidis.RedisError
	var gerr redis.Error
	switch {
	case errors.As(err, &rerr):
		return strings.HasPrefix(rerr.Error(), "NOTOWNED ")
	case errors.As(err, &gerr):
		return strings.HasPrefix(gerr.Error(), "NOTOWNED ")
	}
	return false
}
