package redisstore

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
)

// backend runs the decision script on one Redis client library.
type backend interface {
	// eval runs a script with EVALSHA, falling back to EVAL when Redis
	// answers NOSCRIPT, and returns its integer array reply.
	eval(ctx context.Context, sc script, keys, args []string) ([]int64, error)
	// sharded reports whether keys with different hash tags may live on
	// different servers (Redis Cluster, a go-redis Ring).
	sharded() bool
	// batching says which decisions may share a batch call (route.go).
	batching() batchMode
}

// script names one of the store's scripts.
type script int

const (
	batchScript          script = iota // batchSource
	batchCrossSlotScript               // batchCrossSlotSource
	nodesScript                        // nodesSource
	numScripts
)

// scriptSources returns the source of every script, by name.
func scriptSources() [numScripts]string {
	return [numScripts]string{batchScript: batchSource, batchCrossSlotScript: batchCrossSlotSource, nodesScript: nodesSource}
}

type rueidisBackend struct {
	c       rueidis.Client
	scripts [numScripts]*rueidis.Lua

	mu    sync.Mutex
	nodes map[string]rueidis.Client // Cluster: a client of each node, by address (Nodes)
}

func newRueidisBackend(c rueidis.Client) *rueidisBackend {
	b := &rueidisBackend{c: c}
	for i, src := range scriptSources() {
		b.scripts[i] = rueidis.NewLuaScript(src)
	}
	return b
}

func (b *rueidisBackend) eval(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	return b.evalWith(ctx, b.c, sc, keys, args)
}

func (b *rueidisBackend) evalWith(ctx context.Context, c rueidis.Client, sc script, keys, args []string) ([]int64, error) {
	resp := b.scripts[sc].Exec(ctx, c, keys, args)
	if err := resp.Error(); err != nil {
		return nil, err
	}
	arr, err := resp.ToArray()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", redlimit.ErrBadReply, err)
	}
	out := make([]int64, len(arr))
	for i := range arr {
		if out[i], err = arr[i].AsInt64(); err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", redlimit.ErrBadReply, i, err)
		}
	}
	return out, nil
}

func (b *rueidisBackend) sharded() bool { return b.c.Mode() == rueidis.ClientModeCluster }

func (b *rueidisBackend) batching() batchMode {
	if b.sharded() {
		return batchPerSlot
	}
	return batchOne
}

type goRedisBackend struct {
	c       redis.UniversalClient
	scripts [numScripts]*redis.Script

	mu    sync.Mutex
	nodes map[string]*redis.Client // Cluster: the client of each master, by address (MasterForKey)
}

func newGoRedisBackend(c redis.UniversalClient) *goRedisBackend {
	b := &goRedisBackend{c: c}
	for i, src := range scriptSources() {
		b.scripts[i] = redis.NewScript(src)
	}
	return b
}

func (b *goRedisBackend) eval(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	return b.evalWith(ctx, b.c, sc, keys, args)
}

func (b *goRedisBackend) evalWith(ctx context.Context, c redis.Scripter, sc script, keys, args []string) ([]int64, error) {
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	reply, err := b.scripts[sc].Run(ctx, c, keys, argv...).Result()
	if err != nil {
		return nil, err
	}
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T, want an array", redlimit.ErrBadReply, reply)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T, want an integer", redlimit.ErrBadReply, i, v)
		}
		out[i] = n
	}
	return out, nil
}

func (b *goRedisBackend) sharded() bool {
	_, single := b.c.(*redis.Client)
	return !single
}

func (b *goRedisBackend) batching() batchMode {
	switch b.c.(type) {
	case *redis.Client:
		return batchOne
	case *redis.ClusterClient:
		return batchPerSlot
	}
	return batchNone
}

// slotOwners implements nodeBackend with CLUSTER SLOTS. rueidis keeps its
// own view of the slots to itself. But its clients of the nodes are the
// ones the Cluster names there.
func (b *rueidisBackend) slotOwners(ctx context.Context) ([]string, error) {
	ranges, err := b.c.Do(ctx, b.c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	owners := make([]string, numSlots)
	for _, e := range ranges {
		r, err := e.ToArray()
		if err != nil || len(r) < 3 {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry", redlimit.ErrBadReply)
		}
		lo, err1 := r[0].AsInt64()
		hi, err2 := r[1].AsInt64()
		m, err3 := r[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(m) < 2 || lo < 0 || hi >= numSlots {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry", redlimit.ErrBadReply)
		}
		host, err1 := m[0].ToString()
		port, err2 := m[1].AsInt64()
		if err1 != nil || err2 != nil || host == "" || host == "?" {
			continue // no address known: the slots go alone
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for slot := lo; slot <= hi; slot++ {
			owners[slot] = addr
		}
	}
	nodes := b.c.Nodes()
	b.mu.Lock()
	b.nodes = nodes
	b.mu.Unlock()
	return owners, nil
}

// node returns the client of the node addr, or nil.
func (b *rueidisBackend) node(addr string) rueidis.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.nodes[addr]
	if n == nil {
		b.nodes = b.c.Nodes()
		n = b.nodes[addr]
	}
	return n
}

func (b *rueidisBackend) evalOn(ctx context.Context, addr string, sc script, keys, args []string) ([]int64, error) {
	n := b.node(addr)
	if n == nil {
		return nil, fmt.Errorf("%w %s", errNoNode, addr)
	}
	return b.evalWith(ctx, n, sc, keys, args)
}

func (b *rueidisBackend) version(ctx context.Context, addr string) (int, error) {
	n := b.node(addr)
	if n == nil {
		return 0, fmt.Errorf("%w %s", errNoNode, addr)
	}
	info, err := n.Do(ctx, n.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return 0, err
	}
	return majorVersion(info)
}

// majorVersion returns the major version in an INFO server reply.
func majorVersion(info string) (int, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			return strconv.Atoi(major)
		}
	}
	return 0, fmt.Errorf("%w: no redis_version in INFO", redlimit.ErrBadReply)
}

// slotOwners implements nodeBackend from go-redis's own view of the
// Cluster (MasterForKey), with the clients it would use.
func (b *goRedisBackend) slotOwners(ctx context.Context) ([]string, error) {
	cc, ok := b.c.(*redis.ClusterClient)
	if !ok {
		return nil, fmt.Errorf("redisstore: not a Cluster client")
	}
	owners := make([]string, numSlots)
	nodes := map[string]*redis.Client{}
	for slot, key := range slotKeys() {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		addr := c.Options().Addr
		owners[slot], nodes[addr] = addr, c
	}
	b.mu.Lock()
	b.nodes = nodes
	b.mu.Unlock()
	return owners, nil
}

func (b *goRedisBackend) node(addr string) *redis.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nodes[addr]
}

func (b *goRedisBackend) evalOn(ctx context.Context, addr string, sc script, keys, args []string) ([]int64, error) {
	n := b.node(addr)
	if n == nil {
		return nil, fmt.Errorf("%w %s", errNoNode, addr)
	}
	return b.evalWith(ctx, n, sc, keys, args)
}

func (b *goRedisBackend) version(ctx context.Context, addr string) (int, error) {
	n := b.node(addr)
	if n == nil {
		return 0, fmt.Errorf("%w %s", errNoNode, addr)
	}
	info, err := n.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	return majorVersion(info)
}

// slotKeys returns a key of every slot, by slot.
var slotKeys = sync.OnceValue(func() []string {
	keys := make([]string, numSlots)
	for i, left := 0, numSlots; left > 0; i++ {
		k := strconv.Itoa(i)
		if s := keySlot(k); keys[s] == "" {
			keys[s] = k
			left--
		}
	}
	return keys
})
