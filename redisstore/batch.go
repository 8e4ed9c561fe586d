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
	"github.com/redlimit/redlimit/internal/budget"
)

// Batch caps: a batch holds at most maxBatch decisions and about
// maxBatchBytes of keys and arguments, so that one script call cannot hold
// Redis for long (docs/SECURITY.md measures the worst calls).
const (
	maxBatch      = 64
	maxBatchBytes = 32 << 10
)

// WithBatching turns batching on (the default) or off. With batching, the
// decisions ([Store.AllowN], [Store.Peek] and [Store.AllowAll]) that
// reach the Store for one Redis node while a call to that node is in
// flight wait and then go together as one script call,
// which decides them one after another in their order of arrival, at one
// instant: each gets the answer it would have got alone at that instant,
// and concurrent requests for one key are admitted greedily in arrival
// order, each if it still fits. They go when the call in flight answers,
// or at once as a second call in flight once at least half the decisions
// in play wait (so that the node has the next call to run while the
// answer to the first travels back), never more than two calls at a time.
// Two calls in flight may run in either order (the client may send them
// on two connections): their callers are concurrent, and each call
// decides its own in their order of arrival.
// A caller that finds no call in flight is sent at once, with the script
// it would run without batching, so an idle Store adds no delay. Without
// batching, every decision is a script call of its own. [Store.Admit],
// [Store.DebitOnce], [Store.Reset] and refunds are never batched.
//
// A caller whose context ends while its decision waits leaves the queue:
// the decision is never sent. One whose decision was sent already gets its
// context's error too, and Redis may still count it, as a call of its own
// cancelled in flight. Only decisions in the calls in flight, two per
// node at a time, can be counted so.
//
// With batching, [Store.AllowN] and [Store.Peek] return by their
// context's deadline even if the client library has not answered: the
// script call of a caller with a deadline is made on a goroutine the Store
// keeps, not on the caller's (see [Store.ReturnsByContext]). A lone caller
// without a deadline (an HTTP request's context, say) makes its call on its
// own goroutine, as without batching, which saves it a hand-off; its
// cancellation ends the call when the client library honours it, as it
// does. On Redis Cluster a batch is of one node (see
// [WithNodeBatches]); an AllowAll of several identifiers is decided in
// groups (see [Store.AllowAll]), each batched with the node's decisions.
func WithBatching(on bool) Option {
	return func(s *Store) error {
		s.noBatching = !on
		return nil
	}
}

// ReturnsByContext reports whether [Store.AllowN] and [Store.Peek] return
// by their context's deadline even if the client library does not answer
// (see [WithBatching]): true with batching on, on a backend that batches
// (not a go-redis Ring). A caller that has to answer by a deadline can
// then call them on its own goroutine, with that deadline (resilient
// does).
func (s *Store) ReturnsByContext() bool {
	return s.batches.mode != batchNone && !s.batchScriptAlways
}

// batcher groups the decisions bound for one destination (a standalone
// server, a Cluster slot or a Cluster node) by group commit, with no
// timer: what arrives while a call of the destination is in flight waits
// in queue and goes in the next call, when a call in flight answers or,
// while only one is in flight, at once as a second call once early holds.
// With one call in flight, the server waits while its answer travels back
// and is handed out and the next call travels to it, and the callers wait
// while the server runs the call (docs/BENCHMARKS.md, "What the design
// choices buy"); a second call fills the server's wait. That it waits until half the
// decisions in play are in it keeps it from being a call of a few
// decisions, which would cost the server more per decision than it saves,
// and splits a steady load into two even halves that take turns.
type batcher struct {
	s    *Store
	node string // a Cluster node's address: its batches go to it with the keys in ARGV (pernode.go); "" otherwise

	mu        sync.Mutex
	inflight  int // calls in flight or about to be sent: 0, 1 or 2
	flying    int // the decisions in those calls
	returning int // decisions answered that may come back: their callers' next decisions (see early)
	queue     []*pending
	waiting   int // the decisions in queue not cancelled
}

// early reports whether what waits goes now, in a second call in flight
// beside the one in flight (see batcher): once at least half the
// decisions in play wait, counting as in play those in flight and those
// answered whose callers may come back. An answer adds its decisions to
// returning and each arrival takes one away, as the callers of a closed
// loop (a worker, a client's connection) come back once answered. b.mu
// is held.
func (b *batcher) early() bool {
	return b.waiting >= b.flying+b.returning
}

// pending is one decision waiting for a batch: of one limit (AllowN, Peek)
// or of several (AllowAll, one hash tag).
type pending struct {
	ctx   context.Context
	end   *budget.End      // the end of the caller's budget, from ctx (see internal/budget), or nil
	call  endCtx           // with end, the context of a call made for it alone on a kept goroutine
	op    string           // opAllow or opPeek; opAllow for several limits
	req   redlimit.Request // one limit
	key   string           // its Redis key
	reqs  []redlimit.Request
	keys  []string      // several limits (reqs not nil): their Redis keys, one hash tag
	slot  int           // the Cluster slot of the keys
	state int           // queued, sent or cancelled; under the batcher's mu
	out   outcome       // the answer, filled by the call that decides it
	done  chan struct{} // sent on once out is filled (a channel of outcomes would be two allocations)
	// pooled: from pendings (newPendingOne), given back by decide once
	// its caller has the answer and nothing holds it any more (not after
	// its call field has been a call's context: see batchRun.run).
	pooled bool
}

// pendings keeps single-limit pendings, with their done channels, between
// decisions: two allocations a decision fewer.
var pendings = sync.Pool{New: func() any { return &pending{done: make(chan struct{}, 1)} }}

// answered returns p's outcome, once its call has sent on done (which it
// does last: the call is done with p), and gives p back to pendings.
func (p *pending) answered() outcome {
	o := p.out
	release(p)
	return o
}

// release gives p back to pendings if it came from there. Only once no
// one holds p: its caller has the answer from done (or decided it itself)
// and it is in no queue and no call.
func release(p *pending) {
	if p.pooled {
		done := p.done
		*p = pending{done: done}
		pendings.Put(p)
	}
}

const (
	queued = iota
	sent
	cancelled
)

// outcome is a decision's answer: res for one limit, results for several,
// at the time (µs) it was decided at; or the error of its call.
type outcome struct {
	res     redlimit.Result
	results []redlimit.Result
	at      int64
	err     error
}

// endCtx is the context of a call a kept goroutine makes for one pending
// decision with the end of its caller's budget: the caller's values, and
// that end (shared, see internal/budget) as its deadline, without a timer
// of its own. The budget ends before the caller's deadline, if it has one;
// the caller's cancellation ends the caller's wait (see batcher.decide),
// not this call, which ends with the budget, as a batch call ends with its
// callers' deadlines.
type endCtx struct {
	context.Context
	end *budget.End
}

func (c *endCtx) Deadline() (time.Time, bool) { return c.end.At, true }
func (c *endCtx) Done() <-chan struct{}       { return c.end.Done }

func (c *endCtx) Err() error {
	select {
	case <-c.end.Done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// deadline returns when p's caller stops waiting for it: its context's
// deadline or the end of its budget, whichever is earlier; ok is false
// when it has neither.
func (p *pending) deadline() (d time.Time, ok bool) {
	d, ok = p.ctx.Deadline()
	if p.end != nil && (!ok || p.end.At.Before(d)) {
		return p.end.At, true
	}
	return d, ok
}

// size is roughly what p adds to a batch call, in bytes.
func (p *pending) size() int {
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
func (p *pending) limits() int {
	if p.reqs == nil {
		return 1
	}
	return len(p.reqs)
}

// newPending returns the pending decision of op on reqs (AllowAll's,
// opAllow, when several or a debit), whose Redis keys share one slot.
func (s *Store) newPending(ctx context.Context, op string, reqs []redlimit.Request) *pending {
	if len(reqs) == 1 && !reqs[0].Debit {
		return s.newPendingOne(ctx, op, reqs[0])
	}
	p := &pending{ctx: ctx, end: budget.Of(ctx), op: op, reqs: reqs, keys: make([]string, len(reqs)), done: make(chan struct{}, 1)}
	for i, r := range reqs {
		p.keys[i] = s.key(hashTag(r.Key), r.Limit)
	}
	// Only Cluster routes by slot: one server needs no CRC16 per decision.
	if s.batches.slots != nil || s.batches.nodes != nil {
		p.slot = keySlot(p.keys[0])
	}
	return p
}

// newPendingOne is newPending of the one request r, not a debit, as AllowN
// and Peek make it: with no slice of one request to allocate, and from
// pendings, to which batcher.decide gives it back once answered.
func (s *Store) newPendingOne(ctx context.Context, op string, r redlimit.Request) *pending {
	p := pendings.Get().(*pending)
	*p = pending{ctx: ctx, end: budget.Of(ctx), op: op, req: r, key: s.key(hashTag(r.Key), r.Limit), done: p.done, pooled: true}
	if s.batches.slots != nil || s.batches.nodes != nil {
		p.slot = keySlot(p.key)
	}
	return p
}

// decide decides p through b and returns its outcome, by the end of p's
// context whatever the client library does.
func (b *batcher) decide(p *pending) outcome {
	ctx := p.ctx
	b.mu.Lock()
	b.returning = max(b.returning-1, 0)
	if b.inflight == 0 {
		// Nothing in flight: this caller's call goes now, as it would
		// without batching, and whatever arrives meanwhile follows it; on
		// a kept goroutine when the caller has a deadline to keep.
		b.inflight, b.flying = 1, 1
		if _, ok := p.deadline(); !ok {
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
		var early []*pending
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
	var ended <-chan struct{} // nil, which never ends the wait, without a budget's end
	if p.end != nil {
		ended = p.end.Done
	}
	if ended == nil && ctx.Done() == nil {
		// Nothing ends the wait but the answer (context.Background): a
		// receive costs less than a select.
		<-p.done
		return p.answered()
	}
	select {
	case <-p.done:
		return p.answered()
	case <-ctx.Done():
	case <-ended:
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
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded // the budget's end
	}
	return outcome{err: fmt.Errorf("redisstore: %s: %w", p.op, err)}
}

// dropCancelledLocked takes the given-up decisions out of the queue once
// they are more than half of it. The queue then holds at most twice the
// decisions waiting, while the calls in flight hang; each removal is
// amortized O(1). b.mu is held.
func (b *batcher) dropCancelledLocked() {
	if len(b.queue) > 2*b.waiting {
		b.queue = slices.DeleteFunc(b.queue, func(p *pending) bool { return p.state == cancelled })
	}
}

// next is called when b's call of answered decisions has answered, its
// caller having its answer already: it sends what queued meanwhile, from a
// goroutine that carries on while more queues, or leaves b idle.
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
	alone *pending
	batch []*pending
}

func (r batchRun) run() {
	if p := r.alone; p != nil {
		ctx := p.ctx
		if p.end != nil {
			p.call = endCtx{p.ctx, p.end}
			ctx = &p.call
			// The client library may derive contexts from &p.call that
			// outlive the call (a cancel propagation's goroutine reads its
			// Done): p is not given back to pendings.
			p.pooled = false
		}
		p.out = r.b.s.decideAlone(ctx, p, r.b.s.scriptTime())
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

// take is called by a call that has answered: it records its answered
// decisions, if not done yet (answered), and returns the next batch for
// the caller to send, reusing buf; or nil, the call's place in flight
// given up, when nothing waits, or too little to go beside another call in
// flight (see batcher).
func (b *batcher) take(buf []*pending, answered int) []*pending {
	b.mu.Lock()
	b.answeredLocked(answered)
	var batch []*pending
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
func (b *batcher) takeLocked(buf []*pending) []*pending {
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
func (b *batcher) run(batch []*pending) {
	for batch != nil {
		b.send(batch)
		clear(batch)
		batch = b.take(batch, 0)
	}
}

// send decides batch in one script call (two or more on a Cluster node
// that did not serve every key, see pernode.go) and gives each caller its
// answer, or its call's error. The call's context is cancelled by no
// caller (a caller that gives up must not lose the others' decisions); it
// has the latest of the callers' deadlines, if each has one.
func (b *batcher) send(batch []*pending) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, p := range batch {
		d, ok := p.deadline()
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

// sortRuns puts the single-limit decisions on one key together, in
// arrival order, so that the batch script reads and writes the key once
// for all of them (lua/batch.lua): decisions on different keys commute at
// one instant. A decision of several limits stays where it is, and so
// does every decision relative to it.
func sortRuns(batch []*pending) {
	byKey := func(x, y *pending) int { return strings.Compare(x.key, y.key) }
	from := 0
	for i, p := range batch {
		if p.reqs != nil {
			slices.SortStableFunc(batch[from:i], byKey)
			from = i + 1
		}
	}
	slices.SortStableFunc(batch[from:], byKey)
}

// decideAlone decides p in the script it runs without batching (the
// single-limit script of its algorithm, or the decision script for
// several limits), at the time at (ARGV[2]).
func (s *Store) decideAlone(ctx context.Context, p *pending, at string) outcome {
	if p.reqs != nil {
		keys, args := s.decisionArgsKeys(p.op, p.reqs, p.keys, at)
		reply, err := s.b.eval(ctx, decideScript, keys, args)
		if err != nil {
			return outcome{err: fmt.Errorf("redisstore: %s: %w", p.op, err)}
		}
		if len(reply) != 1+4*len(p.reqs) {
			return outcome{err: fmt.Errorf("redisstore: %w: %d values for %d limits", redlimit.ErrBadReply, len(reply), len(p.reqs))}
		}
		o := outcome{results: make([]redlimit.Result, len(p.reqs)), at: reply[0]}
		for i, r := range p.reqs {
			o.results[i] = result(r, reply[1+4*i:5+4*i])
		}
		return o
	}
	reply, err := s.callSingleLimitScript(ctx, p.op, p.req, p.key, at)
	if err != nil {
		return outcome{err: fmt.Errorf("redisstore: %s: %w", p.op, err)}
	}
	if len(reply) != 5 {
		return outcome{err: fmt.Errorf("redisstore: %w: %d values for 1 limit", redlimit.ErrBadReply, len(reply))}
	}
	return outcome{res: result(p.req, reply[1:5]), at: reply[0]}
}

// decideBatch decides batch in one run of the batch script (see
// lua/batch.lua) at the time at, and fills each decision's out. With node
// "", the call goes through the client, routed by its keys (KEYS), which
// must share one slot on Cluster; otherwise it goes to the Cluster node
// node with the keys in ARGV and the allow-cross-slot-keys flag (see
// pernode.go). The error is the call's, or ErrBadReply for a reply that
// is not one for this batch (which may have filled some outs: the caller
// gives each the error, setErr).
func (s *Store) decideBatch(ctx context.Context, batch []*pending, at, node string) error {
	// The limits of the decisions of one limit, each sent once (the
	// batch's decisions mostly share a few), and two bytes per entry: a
	// decision of several limits, or a run of identical decisions of one
	// limit (one key, one limit, one cost, allow or peek), its byte and
	// how many.
	var buf [8]batchLimit
	specs := buf[:0]
	nkeys, nvals := 0, 0
	var decBuf [2 * maxBatch]byte
	dec := decBuf[:0]
	last := -1 // the limit of the entry being written, if of one limit
	for i, p := range batch {
		if p.reqs != nil {
			dec = append(dec, batchSeveral, 1)
			nkeys, nvals, last = nkeys+len(p.reqs), nvals+1+7*len(p.reqs), -1
			continue
		}
		l := p.req.Limit
		x := batchLimit{op: "a", alg: l.Algorithm, window: l.Period.Microseconds(), count: l.Count, cost: p.req.Cost}
		if l.Algorithm == redlimit.TokenBucket {
			x.window, x.count = l.EmissionInterval(), l.Burst
		}
		if p.op == opPeek {
			x.op = "p"
		}
		k := 0
		for k < len(specs) && specs[k] != x {
			k++
		}
		if k == len(specs) {
			if k == batchMostLimits {
				return fmt.Errorf("redisstore: a batch of more than %d limits", batchMostLimits) // not from the batcher (maxBatch)
			}
			specs = append(specs, x)
		}
		if k == last && batch[i-1].key == p.key && dec[len(dec)-1] < maxBatch {
			dec[len(dec)-1]++
			continue
		}
		dec = append(dec, byte(batchFirstLimit+k), 1)
		nkeys, last = nkeys+1, k
	}
	entries := len(dec) / 2
	keys := make([]string, 0, nkeys)
	args := make([]string, 6, 6+5*len(specs)+nvals+nkeys)
	args[0], args[1], args[2], args[4], args[5] = strconv.Itoa(entries), at, s.margin, string(dec), strconv.Itoa(len(specs))
	for _, x := range specs {
		args = append(args, x.op, strconv.Itoa(int(x.alg)), strconv.FormatInt(x.window, 10), strconv.FormatInt(x.count, 10), strconv.FormatInt(x.cost, 10))
	}
	for e, i := 0, 0; e < entries; e++ {
		p := batch[i]
		if p.reqs == nil {
			keys = append(keys, p.key)
			i += int(dec[2*e+1])
			continue
		}
		i++
		args = append(args, strconv.Itoa(len(p.reqs)))
		for i, r := range p.reqs {
			kind := "0"
			if r.Debit {
				kind = "1"
			}
			args = append(appendLimitArgs(args, r), kind)
			keys = append(keys, p.keys[i])
		}
	}
	var reply []int64
	var err error
	if node == "" {
		reply, err = s.b.eval(ctx, batchScript, keys, args)
	} else {
		args[3] = strconv.Itoa(len(args))
		args = append(args, keys...)
		reply, err = s.batches.nodes.nb.evalOn(ctx, node, batchCrossSlotScript, keys[:1], args)
	}
	if err != nil {
		return fmt.Errorf("redisstore: batch of %d: %w", len(batch), err)
	}
	if len(reply) == 0 || !batchReply(batch, dec, reply[0], reply[1:]) {
		return fmt.Errorf("redisstore: %w: %d values for a batch of %d decisions", redlimit.ErrBadReply, len(reply), len(batch))
	}
	return nil
}

// batchReply fills the outs of batch, sent as the entries dec (see
// decideBatch), from the batch script's reply (see lua/batch.lua), now
// and v, and reports whether v was such a reply, each value where it is
// expected, and no more.
func batchReply(batch []*pending, dec []byte, now int64, v []int64) bool {
	// The entries that failed on their key, with their kinds, come last.
	if len(v) == 0 {
		return false
	}
	nf := v[len(v)-1]
	if nf < 0 || 2*nf > int64(len(v)-1) {
		return false
	}
	fails := v[len(v)-1-int(2*nf) : len(v)-1]
	v = v[:len(v)-1-int(2*nf)]
	for e, i := 0, 0; e < len(dec)/2; e++ {
		p := batch[i]
		if len(fails) > 0 && fails[0] == int64(e+1) {
			err := keyStateError(p.op, fails[1])
			for _, q := range batch[i : i+int(dec[2*e+1])] {
				q.out = outcome{at: now, err: err}
			}
			i, fails = i+int(dec[2*e+1]), fails[2:]
			continue
		}
		if p.reqs != nil {
			i++
			if len(v) < 4*len(p.reqs) {
				return false
			}
			p.out = outcome{at: now, results: make([]redlimit.Result, len(p.reqs))}
			for j, r := range p.reqs {
				p.out.results[j] = result(r, v[:4])
				v = v[4:]
			}
			continue
		}
		// A decision of one limit answers two values allowed, three
		// denied; a run of m, its segments.
		m := int(dec[2*e+1])
		switch {
		case m == 1 && len(v) >= 2 && v[0] >= 0:
			p.out = outcome{at: now, res: resultOf(p.req, true, v[0], 0, v[1])}
			v = v[2:]
		case m == 1 && len(v) >= 3:
			p.out = outcome{at: now, res: resultOf(p.req, false, -1-v[0], v[1], v[2])}
			v = v[3:]
		case m == 1:
			return false
		}
		for j := i; m > 1 && j < i+m; {
			switch c := int64(i + m - j); {
			case len(v) >= 5 && v[0] > 0 && v[0] <= c:
				for k := range v[0] {
					batch[j].out = outcome{at: now, res: resultOf(batch[j].req, true, v[1]+k*v[3], 0, v[2]+k*v[4])}
					j++
				}
				v = v[5:]
			case len(v) >= 4 && v[0] == -c:
				for ; j < i+m; j++ {
					batch[j].out = outcome{at: now, res: resultOf(batch[j].req, false, v[1], v[2], v[3])}
				}
				v = v[4:]
			default:
				return false
			}
		}
		i += m
	}
	return len(v) == 0 && len(fails) == 0
}

// keyStateError is the error of a decision of op whose key the batch
// script could not use, of the kind it replied (see lua/prelude.lua,
// key_failure).
func keyStateError(op string, kind int64) error {
	what := "state the script cannot parse"
	if kind == 1 {
		what = "a key of another type (WRONGTYPE)"
	}
	return fmt.Errorf("redisstore: %s: %w: %s", op, redlimit.ErrKeyState, what)
}

// batchLimit is a limit of the batch script's decisions of one limit, as
// it sends them (see lua/batch.lua): op, algorithm, window µs (token
// bucket: emission interval µs), count (token bucket: burst) and cost.
type batchLimit struct {
	op                  string
	alg                 redlimit.Algorithm
	window, count, cost int64
}

// The batch script's byte for a decision of several limits, that of its
// first limit of one (the k-th is batchFirstLimit + k), and how many
// limits a byte can name, which a batch of maxBatch decisions never
// passes (the blank constant fails to compile if maxBatch were more).
const (
	batchSeveral    = '0'
	batchFirstLimit = 65
	batchMostLimits = 256 - batchFirstLimit
	_               = uint8(batchMostLimits - maxBatch)
)

// result makes r's result from the script's four values: allowed (1/0),
// remaining, retry-after µs (-1 for never) and reset-after µs.
func result(r redlimit.Request, v []int64) redlimit.Result {
	return resultOf(r, v[0] == 1, v[1], v[2], v[3])
}

// resultOf is result of the values allowed, remaining, retry-after µs (-1
// for never) and reset-after µs.
func resultOf(r redlimit.Request, allowed bool, remaining, retry, reset int64) redlimit.Result {
	res := redlimit.Result{
		Allowed:    allowed,
		Limit:      r.Limit.Max(),
		Remaining:  remaining,
		RetryAfter: fromMicros(retry),
		ResetAfter: fromMicros(reset),
	}
	if retry < 0 {
		res.RetryAfter = redlimit.Never
	}
	return res
}
