package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
)

// Script returns the Lua source of the decision script.
func Script() string { return batchSource }

// LuaFile returns the source of lua/<name>.lua.
func LuaFile(name string) string { return joinScript(name) }

// RefundGroup gives back what an allowed group of requests consumed, as
// AllowAll does on Redis Cluster when another group denied.
func (s *Store) RefundGroup(ctx context.Context, reqs []redlimit.Request, results []redlimit.Result, at int64) error {
	return s.refund(ctx, reqs, results, at, nil, nil)
}

// BatchState returns how many calls of the standalone batcher are in
// flight, how many decisions wait for the next, and how many decisions the
// batcher counts in flight.
func (s *Store) BatchState() (inflight, waiting, flying int) {
	b := s.batches.one
	if b == nil {
		return 0, 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.queue {
		if p.state == queued {
			waiting++
		}
	}
	if waiting != b.waiting {
		panic(fmt.Sprintf("%d decisions queued, the batcher counts %d", waiting, b.waiting))
	}
	return b.inflight, waiting, b.flying
}

// BatchQueueLen returns how many decisions the standalone batcher's queue
// holds, given up or not.
func (s *Store) BatchQueueLen() int {
	b := s.batches.one
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// WithBatchScriptAlways makes every AllowN and Peek a batch of one sent
// past the batcher: on Cluster, to its node with the keys in ARGV, which
// batch.lua decides (not the lone block), so that sequential tests check
// it against the other stores.
func WithBatchScriptAlways() Option {
	return func(s *Store) error {
		s.batchScriptAlways = true
		return nil
	}
}

// DecideBatch decides reqs in one run of the batch script, in the order
// given, as a batch of concurrent AllowN calls (Peek where peek says) would
// be decided; on Cluster every key must be in one slot.
func (s *Store) DecideBatch(ctx context.Context, reqs []redlimit.Request, peek []bool) ([]redlimit.Result, error) {
	ds := make([][]redlimit.Request, len(reqs))
	for i := range reqs {
		ds[i] = reqs[i : i+1]
	}
	out, err := s.DecideMixedBatch(ctx, ds, peek, false)
	if err != nil {
		return nil, err
	}
	res := make([]redlimit.Result, len(reqs))
	for i := range out {
		res[i] = out[i][0]
	}
	return res, nil
}

// DecideMixedBatch decides ds in one batch, in the order given: each as
// AllowAll would (Peek where peek says, for one request), at one instant.
// With onNode, on Cluster, the batch goes to the node of the first
// decision's slot, whose view the Store loads first if it has none, with
// the keys in ARGV, and falls back slot by slot where the node does not
// serve a key; without, every key must be in one slot.
func (s *Store) DecideMixedBatch(ctx context.Context, ds [][]redlimit.Request, peek []bool, onNode bool) ([][]redlimit.Result, error) {
	out, errs := s.DecideMixedBatchEach(ctx, ds, peek, onNode)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecideMixedBatchEach is DecideMixedBatch with each decision's error.
func (s *Store) DecideMixedBatchEach(ctx context.Context, ds [][]redlimit.Request, peek []bool, onNode bool) ([][]redlimit.Result, []error) {
	batch := make([]*entry, len(ds))
	for i, reqs := range ds {
		op := opAllow
		if peek != nil && peek[i] {
			op = opPeek
		}
		batch[i] = s.newEntry(ctx, op, reqs)
	}
	node := ""
	if onNode {
		node = s.batches.nodeOf(ctx, batch[0].slot)
	}
	s.sendBatch(ctx, batch, s.scriptTime(), node)
	out := make([][]redlimit.Result, len(ds))
	errs := make([]error, len(ds))
	for i, p := range batch {
		if errs[i] = p.out.err; errs[i] != nil {
			continue
		}
		if p.reqs == nil {
			out[i] = []redlimit.Result{p.out.res}
		} else {
			out[i] = p.out.results
		}
	}
	return out, errs
}

// DecisionArgs returns the keys and arguments with which AllowAll runs
// the decision script, Script(), for reqs at the time at in µs: a batch
// of one entry, which replies { now, four values per limit, 0 }.
func (s *Store) DecisionArgs(reqs []redlimit.Request, at int64) (keys, args []string) {
	w := wire{now: at}
	w.several(kindSeveral, s.keys(reqs), reqs)
	return w.args(strconv.FormatInt(at, 10), s.margin, false)
}

// KeySlot returns the Redis Cluster slot of the Redis key key.
func KeySlot(key string) int { return keySlot(key) }

// NodeOf returns the address of the node whose batcher takes slot's
// decisions, loading the Store's view of the Cluster if it has none, or "".
func (s *Store) NodeOf(ctx context.Context, slot int) string { return s.batches.nodeOf(ctx, slot) }

// NodeFallbacks returns how many batches of a Cluster node the node did
// not take, and were decided again slot by slot.
func (s *Store) NodeFallbacks() int64 {
	if s.batches.nodes == nil {
		return 0
	}
	return s.batches.nodes.fallbacks.Load()
}

// WithClientDeafToContext makes the Store's client library ignore the
// contexts of its script calls: a call waits for Redis's answer however
// long, as a client library that hangs would.
func WithClientDeafToContext() Option {
	return func(s *Store) error {
		s.b = deafBackend{s.b}
		return nil
	}
}

type deafBackend struct{ backend }

func (d deafBackend) eval(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	return d.backend.eval(context.WithoutCancel(ctx), sc, keys, args)
}

// AcquireBatch acquires leases ids of c on key in one batch of the
// script, which batch.lua decides (a lone entry takes lone.lua's path).
func (s *Store) AcquireBatch(ctx context.Context, key string, c redlimit.Concurrency, ids ...string) ([]redlimit.Lease, error) {
	w := s.newWire()
	for _, id := range ids {
		w.lease(kindAcquire, s.leaseKey(key), c, id)
	}
	keys, args := w.args(s.scriptTime(), s.margin, false)
	v, err := s.b.eval(ctx, batchScript, keys, args)
	if err != nil {
		return nil, err
	}
	r, ok := readReply(v)
	if !ok {
		return nil, fmt.Errorf("reply %v", v)
	}
	var out []redlimit.Lease
	for range ids {
		if f := r.next(); f != 0 {
			return nil, entryError("acquire", f)
		}
		x := r.values(3)
		if x == nil {
			return nil, badReply("acquire", &r)
		}
		out = append(out, redlimit.Lease{Held: x[0] == 1, InFlight: x[1], RetryAfter: fromMicros(x[2])})
	}
	if !r.ok() {
		return nil, badReply("acquire", &r)
	}
	return out, nil
}

// WithHostClock sets the clock this host's calendar arithmetic reads,
// apart from the time the scripts decide at (WithClock's, or Redis's):
// a host whose clock is skewed from Redis's.
func WithHostClock(now func() time.Time) Option {
	return func(s *Store) error {
		s.hostNow = now
		return nil
	}
}
