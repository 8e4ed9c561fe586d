package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

// Batch caps: a batch holds at most maxBatch decisions and about
// maxBatchBytes of keys and arguments. So one script call cannot hold
// Redis for long. docs/SECURITY.md measures the worst calls.
const (
	maxBatch      = 64
	maxBatchBytes = 32 << 10
)

// WithBatching turns batching on (the default) or off. Batching applies to
// the decisions [Store.AllowN], [Store.Peek] and [Store.AllowAll]. Those
// that reach the Store for one Redis node while a call to that node is in
// flight wait. They then go together as one script call. It decides them
// one after another in their order of arrival, at one instant. Each gets
// the answer it would have got alone at that instant. Concurrent requests
// for one key are admitted greedily in arrival order, each if it still
// fits. They go when the call in flight answers. Or they go at once as a
// second call in flight, once at least half the decisions in play wait.
// The node then has the next call to run while the answer to the first
// travels back. At most two calls are in flight at a time. Two calls in
// flight may run in either order: the client may send them on two
// connections. Their callers are concurrent, and each call decides its own
// in their order of arrival. A caller that finds no call in flight is
// sent at once, so an idle Store adds no delay. Without batching, every
// decision is a script call of its own. [Store.Admit], [Store.DebitOnce],
// [Store.Reset] and refunds are never batched.
//
// A caller whose context ends while its decision waits leaves the queue:
// the decision is never sent. One whose decision was sent already gets its
// context's error too. Redis may still count it, as a call of its own
// cancelled in flight. Only decisions in the calls in flight can be
// counted so: two calls per node at a time.
//
// With batching, [Store.AllowN] and [Store.Peek] return by their
// context's deadline even if the client library has not answered. The
// script call of a caller with a deadline is made on a goroutine the
// Store keeps, not on the caller's (see [Store.ReturnsByContext]). A lone
// caller without a deadline (an HTTP request's context, say) makes its
// call on its own goroutine. That saves it a hand-off. Its cancellation
// ends the call when the client library honours it, as it does. On Redis
// Cluster a batch is of one node (see [WithNodeBatches]). An AllowAll of
// several identifiers is decided in groups (see [Store.AllowAll]). Each
// group is batched with the node's decisions.
func WithBatching(on bool) Option {
	return func(s *Store) error {
		s.noBatching = !on
		return nil
	}
}

// ReturnsByContext reports whether [Store.AllowN] and [Store.Peek] return
// by their context's deadline even if the client library does not answer
// (see [WithBatching]). It is true with batching on, on a backend that
// batches (not a go-redis Ring). A caller that has to answer by a deadline can
// then call them on its own goroutine, with that deadline (resilient
// does).
func (s *Store) ReturnsByContext() bool {
	return s.batches.mode != batchNone && !s.batchScriptAlways
}

// batcher groups the decisions bound for one destination by group commit,
// with no timer. A destination is a standalone server, a Cluster slot or
// a Cluster node. What arrives while a call of the destination is in
// flight waits in queue. It goes in the next call, when a call in flight
// answers. While only one is in flight, it goes at once as a second call
// once early holds. With one call in flight, the server waits while its
// answer travels back and the next call travels to it. The callers wait
// while the server runs the call. A second call fills the server's wait
// (docs/BENCHMARKS.md, "What the design choices buy"). It waits until half
// the decisions in play are in it. That keeps it from being a call of a
// few decisions, which would cost the server more than it saves. It also
// splits a steady load into two even halves that take turns.
type batcher struct {
	s    *Store
	node string // a Cluster node's address: its batches go to it with the keys in ARGV (pernode.go); "" otherwise

	mu        sync.Mutex
	inflight  int // calls in flight or about to be sent: 0, 1 or 2
	flying    int // the decisions in those calls
	returning int // decisions answered that may come back: their callers' next decisions (see early)
	queue     []*entry
	waiting   int // the decisions in queue not cancelled
}

// early reports whether what waits goes now, in a second call beside the
// one in flight (see batcher). It does once at least half the decisions in
// play wait. In play are those in flight, and those answered whose callers
// may come back. An answer adds its decisions to returning. Each arrival
// takes one away. The callers of a closed loop (a worker, a client's
// connection) come back once answered. b.mu is held.
func (b *batcher) early() bool {
	return b.waiting >= b.flying+b.returning
}

// entry is one decision waiting for a batch: of one limit (AllowN, Peek)
// or of several (AllowAll, one hash tag).
type entry struct {
	ctx   context.Context
	op    string           // opAllow or opPeek; opAllow for several limits
	req   redlimit.Request // one limit
	key   string           // its Redis key
	reqs  []redlimit.Request
	keys  []string      // several limits (reqs not nil): their Redis keys, one hash tag
	slot  int           // the Cluster slot of the keys
	state int           // queued, sent or cancelled; under the batcher's mu
	out   entryReply    // the answer, filled by the call that decides it
	done  chan struct{} // sent on once out is filled; a channel of replies would allocate more
	// pooled: from entryPool (newEntryOne), given back by decide once
	// its caller has the answer and nothing holds it any more.
	pooled bool
}

// entryPool keeps single-limit entries, with their done channels, between
// decisions, so a decision allocates neither.
var entryPool = sync.Pool{New: func() any { return &entry{done: make(chan struct{}, 1)} }}

// answered returns p's reply, once its call has sent on done (which it
// does last: the call is done with p), and gives p back to entryPool.
func (p *entry) answered() entryReply {
	o := p.out
	release(p)
	return o
}

// release gives p back to entryPool if it came from there. Only once no
// one holds p: its caller has the answer from done (or decided it itself)
// and it is in no queue and no call.
func release(p *entry) {
	if p.pooled {
		done := p.done
		*p = entry{done: done}
		entryPool.Put(p)
	}
}

const (
	queued = iota
	sent
	cancelled
)

// entryReply is a decision's answer: res for one limit, results for several,
// at the time (µs) it was decided at; or the error of its call.
type entryReply struct {
	res     redlimit.Result
	results []redlimit.Result
	at      int64
	err     error
}

// size is roughly what p adds to a batch call, in bytes.
func (p *entry) size() int {
	if p.reqs == nil {
		return len(p.key) + 48
	}
	n := 8
	for _, k := range p.keys {
		n += len(k) + 64
	}
	return n
}

// limits is how many limits p decides.
func (p *entry) limits() int {
	if p.reqs == nil {
		return 1
	}
	return len(p.reqs)
}

// newEntry returns the entry of the decision of op on reqs (AllowAll's,
// opAllow, when several or a debit), whose Redis keys share one slot.
func (s *Store) newEntry(ctx context.Context, op string, reqs []redlimit.Request) *entry {
	if len(reqs) == 1 && !reqs[0].Debit {
		return s.newEntryOne(ctx, op, reqs[0])
	}
	p := &entry{ctx: ctx, op: op, reqs: reqs, keys: make([]string, len(reqs)), done: make(chan struct{}, 1)}
	for i, r := range reqs {
		p.keys[i] = s.key(hashTag(r.Key), r.Limit)
	}
	// Only Cluster routes by slot: one server needs no CRC16 per decision.
	if s.batches.slots != nil || s.batches.nodes != nil {
		p.slot = keySlot(p.keys[0])
	}
	return p
}

// newEntryOne is newEntry of the one request r, not a debit, as AllowN
// and Peek make it. It allocates no slice of one request. It comes from
// entryPool; batcher.decide gives it back once answered.
func (s *Store) newEntryOne(ctx context.Context, op string, r redlimit.Request) *entry {
	p := entryPool.Get().(*entry)
	*p = entry{ctx: ctx, op: op, req: r, key: s.key(hashTag(r.Key), r.Limit), done: p.done, pooled: true}
	if s.batches.slots != nil || s.batches.nodes != nil {
		p.slot = keySlot(p.key)
	}
	return p
}

// decide decides p through b and returns its reply, by the end of p's
// context whatever the client library does.
func (b *batcher) decide(p *entry) entryReply {
	ctx := p.ctx
	b.mu.Lock()
	b.returning = max(b.returning-1, 0)
	if b.inflight == 0 {
		// Nothing in flight: this caller's call goes now. Whatever arrives
		// meanwhile follows it. It runs on a kept goroutine when the caller
		// has a deadline to keep.
		b.inflight, b.flying = 1, 1
		if _, ok := ctx.Deadline(); !ok {
			b.mu.Unlock()
			o := b.s.decideAlone(ctx, p, b.s.scriptTime())
			b.next(1)
			release(p)
			return o
		}
		p.state = sent
		b.mu.Unlock()
		b.s.runners.Go(batchRun{b: b, alone: p})
	} else {
		b.queue = append(b.queue, p)
		b.waiting++
		var early []*entry
		if b.inflight == 1 && b.early() {
			early = b.takeLocked(nil)
			b.inflight++
			b.flying += len(early)
		}
		b.mu.Unlock()
		if early != nil {
			b.s.runners.Go(batchRun{b: b, batch: early})
		}
	}
	if ctx.Done() == nil {
		// Nothing ends the wait but the answer (context.Background): a
		// receive costs less than a select.
		<-p.done
		return p.answered()
	}
	select {
	case <-p.done:
		return p.answered()
	case <-ctx.Done():
	}
	b.mu.Lock()
	st := p.state
	if st == queued {
		// Never sent: taken out, it cannot be applied.
		p.state = cancelled
		b.waiting--
		b.dropCancelledLocked()
	}
	b.mu.Unlock()
	if st == sent {
		select {
		case <-p.done:
			return p.out
		default:
		}
	}
	// Sent and not answered yet: the batch goes on for the others, and
	// this decision may or may not be applied, as a call of its own
	// cancelled in flight.
	return entryReply{err: fmt.Errorf("redisstore: %s: %w", p.op, ctx.Err())}
}

// dropCancelledLocked takes the given-up decisions out of the queue once
// they are more than half of it. The queue then holds at most twice the
// decisions waiting, while the calls in flight hang; each removal is
// amortized O(1). b.mu is held.
func (b *batcher) dropCancelledLocked() {
	if len(b.queue) > 2*b.waiting {
		b.queue = slices.DeleteFunc(b.queue, func(p *entry) bool { return p.state == cancelled })
	}
}

// next is called when b's call of answered decisions has answered, and its
// caller has its answer. It sends what queued meanwhile, from a goroutine
// that carries on while more queues. Or it leaves b idle.
func (b *batcher) next(answered int) {
	batch := b.take(nil, answered)
	if batch != nil {
		b.s.runners.Go(batchRun{b: b, batch: batch})
	}
}

// maxRunners bounds the goroutines a Store keeps waiting between the
// batches they send: up to two per destination busy at a time.
const maxRunners = 16

// batchRun is what a Store's kept goroutine does for b: decide alone, if
// not nil, then batch, then every batch that queues meanwhile.
type batchRun struct {
	b     *batcher
	alone *entry
	batch []*entry
}

func (r batchRun) run() {
	if p := r.alone; p != nil {
		p.out = r.b.s.decideAlone(p.ctx, p, r.b.s.scriptTime())
		r.b.answered(1)
		p.done <- struct{}{}
		r.batch = r.b.take(nil, 0)
	}
	r.b.run(r.batch)
}

// answered records that a call of n decisions has answered, before its
// callers are given their answers.
func (b *batcher) answered(n int) {
	b.mu.Lock()
	b.answeredLocked(n)
	b.mu.Unlock()
}

func (b *batcher) answeredLocked(n int) {
	b.flying -= n
	b.returning += n
}

// take is called by a call that has answered. It records its answered
// decisions, if not done yet (answered). It returns the next batch for the
// caller to send, reusing buf. It returns nil when nothing waits, or too
// little to go beside another call in flight (see batcher). The call then
// gives up its place in flight.
func (b *batcher) take(buf []*entry, answered int) []*entry {
	b.mu.Lock()
	b.answeredLocked(answered)
	var batch []*entry
	if b.inflight == 1 || b.early() {
		batch = b.takeLocked(buf)
	}
	if batch == nil {
		b.inflight--
	} else {
		b.flying += len(batch)
	}
	b.mu.Unlock()
	return batch
}

// takeLocked returns the next batch from the queue, in arrival order,
// within the caps, reusing buf; or nil when nothing waits. b.mu is held.
func (b *batcher) takeLocked(buf []*entry) []*entry {
	batch := buf[:0]
	bytes, limits := 0, 0
	i := 0
	for ; i < len(b.queue) && limits < maxBatch; i++ {
		p := b.queue[i]
		if p.state == cancelled {
			continue
		}
		if len(batch) > 0 && (bytes+p.size() > maxBatchBytes || limits+p.limits() > maxBatch) {
			break
		}
		p.state = sent
		batch = append(batch, p)
		bytes += p.size()
		limits += p.limits()
	}
	n := copy(b.queue, b.queue[i:])
	clear(b.queue[n:])
	b.queue = b.queue[:n]
	b.waiting -= len(batch)
	if len(batch) == 0 {
		return nil
	}
	return batch
}

// run sends batch, then every batch that queues meanwhile, until the queue
// is empty.
func (b *batcher) run(batch []*entry) {
	for batch != nil {
		b.send(batch)
		clear(batch)
		batch = b.take(batch, 0)
	}
}

// send decides batch in one script call and gives each caller its answer,
// or its call's error. A Cluster node that did not serve every key takes
// more calls (see pernode.go). No caller cancels the call's context: a
// caller that gives up must not lose the others' decisions. The context
// has the latest of the callers' deadlines, if each has one.
func (b *batcher) send(batch []*entry) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if !latest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	at := b.s.scriptTime()
	if len(batch) == 1 {
		p := batch[0]
		p.out = b.s.decideAlone(ctx, p, at)
		b.answered(1)
		p.done <- struct{}{}
		return
	}
	sortRuns(batch)
	b.s.sendBatch(ctx, batch, at, b.node)
	b.answered(len(batch))
	for _, p := range batch {
		p.done <- struct{}{}
	}
}

// sortRuns puts the single-limit decisions on one key together, in arrival
// order. The batch script then reads and writes the key once for all of
// them (lua/batch.lua). Decisions on different keys commute at one
// instant. A decision of several limits stays where it is, and so
// does every decision relative to it.
func sortRuns(batch []*entry) {
	byKey := func(x, y *entry) int { return strings.Compare(x.key, y.key) }
	from := 0
	for i, p := range batch {
		if p.reqs != nil {
			slices.SortStableFunc(batch[from:i], byKey)
			from = i + 1
		}
	}
	slices.SortStableFunc(batch[from:], byKey)
}

// decideAlone decides p alone, a batch of one, at the time at (ARGV[2]).
func (s *Store) decideAlone(ctx context.Context, p *entry, at string) entryReply {
	one := [1]*entry{p}
	if err := s.decideBatch(ctx, one[:], at, ""); err != nil {
		return entryReply{err: err}
	}
	return p.out
}

// decideBatch decides batch in one run of the batch script at the time at
// (see lua/batch.lua and wire.go). It fills each decision's out. With node
// "", the call goes through the client, routed by its keys (KEYS). They
// must share one slot on Cluster. Otherwise the call goes to the Cluster
// node node, with the keys in ARGV and the allow-cross-slot-keys flag (see
// pernode.go). The error is the call's, or ErrBadReply for a reply that
// is not one for this batch. Such a reply may have filled some outs; the
// caller gives each the error (setErr).
func (s *Store) decideBatch(ctx context.Context, batch []*entry, at, node string) error {
	w := s.newWire()
	w.addEntries(batch)
	keys, args := w.args(at, s.margin, node != "")
	var v []int64
	var err error
	if node == "" {
		v, err = s.b.eval(ctx, batchScript, keys, args)
	} else {
		v, err = s.batches.nodes.nb.evalOn(ctx, node, batchCrossSlotScript, keys, args)
	}
	name := batch[0].op
	if len(batch) > 1 {
		name = "batch of " + strconv.Itoa(len(batch))
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s: %w", name, err)
	}
	if !batchReply(batch, &w, v) {
		return fmt.Errorf("redisstore: %s: %w: %d values for %d decisions", name, redlimit.ErrBadReply, len(v), len(batch))
	}
	return nil
}

// addEntries adds the decisions of batch to w, in order.
func (w *wire) addEntries(batch []*entry) {
	for _, p := range batch {
		switch {
		case p.reqs != nil:
			w.several(kindSeveral, p.keys, p.reqs)
		case p.op == opPeek:
			w.one(kindPeek, p.key, p.req)
		default:
			w.one(kindAllow, p.key, p.req)
		}
	}
}

// batchReply fills the outs of batch, sent as w, from the batch script's
// reply v. It reports whether v was such a reply: each value where it is
// expected, and no more.
func batchReply(batch []*entry, w *wire, v []int64) bool {
	r, ok := readReply(v)
	if !ok {
		return false
	}
	for e, i := 0, 0; e < w.entries(); e++ {
		p := batch[i]
		m := 1
		if p.reqs == nil {
			m = int(w.ents[3*e+2])
		}
		if f := r.next(); f != 0 {
			err := entryError(p.op, f)
			for _, q := range batch[i : i+m] {
				q.out = entryReply{at: r.now, err: err}
			}
			i += m
			continue
		}
		if p.reqs != nil {
			x := r.values(4 * len(p.reqs))
			if x == nil {
				return false
			}
			p.out = entryReply{at: r.now, results: make([]redlimit.Result, len(p.reqs))}
			for j, q := range p.reqs {
				p.out.results[j] = result(q, x[4*j:4*j+4])
			}
			i++
			continue
		}
		run, now := batch[i:i+m], r.now
		r.decisions(m, func(j int, allowed bool, rem, retry, reset int64) {
			run[j].out = entryReply{at: now, res: resultOf(run[j].req, allowed, rem, retry, reset)}
		})
		i += m
	}
	return r.ok()
}
