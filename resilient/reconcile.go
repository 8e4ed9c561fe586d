package resilient

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/redlimit/redlimit"
)

// Reconciliation: what this node counted by itself while the store failed
// is owed to the store, per state. That is the admissions its local
// fallback allowed, and every debit. It is charged to the store as debits
// once the store answers again:
//
//   - inline: a call to the store for states this node owes charges their
//     debts first, when the store counts a debit once per id
//     (onceDebiter). A charge lost to a failing store (a Cluster master
//     failing over) is then sent again with its id. A store that counts
//     each charge at most once gets it after the call succeeded instead.
//     The store answers for those keys, so the charge is most likely
//     confirmed. One decision per state and node then does not see the
//     debt. Either way, the node's other calls for a state wait while a
//     charge of it is being sent. They wait within their deadline. One whose
//     deadline ends first gets the failure policy's answer, and the breaker
//     ignores it. The charge's own status is counted by the call that sent
//     it. After the wait, a call charges what is still owed, or is decided.
//     The store never decides for this node without what it owes. The
//     exceptions are the one decision above and the breaker's probe. The
//     probe charges nothing: the store it tries may still be down. A
//     charge that fails leaves the state owed and fails the call. The
//     failure policy answers, as during the outage. Other nodes' debts
//     reach the store with their own calls. Until then the store decides
//     without them;
//   - in the background: after a store answer, one goroutine per Limiter
//     waits a random time up to ReconcileOptions.Spread. So nodes coming
//     back together do not charge together. Then it charges the rest, up
//     to redlimit.MaxRequests states in a row, taken one at a time. A
//     state taken holds its calls. Then it pauses a random time up to a
//     fiftieth of the spread; after a failed charge, up to the spread. It
//     goes on while the breaker stays closed.
//
// The leases the local fallback granted are owed too. Each goes to the
// store with its id and time left (see reconcileLeases). They go before a
// lease call to the store, and first in each background pass.
//
// Each charge is of one state, in a call of its own. When the debt is taken
// to be sent, its units become a charge with a random idempotency id. While
// it is being sent, no other charge of the state is sent. New local units
// of the state are owed apart. Some charges are owed again, their id
// dropped: those not sent, and those the store says did not run (see
// notApplier: Redis refused it, or could not be reached). A charge may not
// be known to be counted: a timeout, a reply lost with its connection. It
// is counted as unconfirmed. If the store counts a debit at most once per
// id (onceDebiter: redisstore.Store), the charge is kept with its id, in
// doubt. It is sent again with that id, before any newer units of the
// state, until it is confirmed or expires: exactly once. The units owed
// meanwhile go in a charge of their own, with an id of its own. So an id
// never covers two amounts. A store without DebitOnce gets each charge at
// most once: a charge in doubt is not sent again.
//
// The debts are bounded: ReconcileOptions.Size states, and Bytes. When
// full, a new state's units are not recorded; they count as dropped. That
// happens after the entries with nothing left to charge are removed from
// a sample. The states held keep being counted in full. A charge is of
// what the store would still hold of the units, had it counted each when
// this node did (see accrual). The rest is not charged (expired). A charge
// in doubt expires a period after its last unit. It is not sent again
// after that. The store keeps its id longer (twice the period for
// redisstore.Store), so a retry never finds its id forgotten.

// ReconcileOptions configure reconciliation: what this node counted by
// itself while the store failed is charged to the store once it answers
// again. The zero value of each field is its default.
type ReconcileOptions struct {
	// Size bounds how many states (key, algorithm, period) the Limiter
	// remembers what it owes for (default [DefaultReconcileSize]). An
	// entry also keeps its key; docs/BENCHMARKS.md has its cost.
	// Negative: no reconciliation of units; the local leases still go to
	// the store. What is recorded: the admissions the local fallback
	// allowed, and every debit, whatever its policy. What fail_open
	// allowed is not recorded. When full, a new state's units are not
	// recorded.
	Size int
	// Bytes bounds the bytes of what is owed (default [DefaultCacheBytes]).
	Bytes int
	// Spread is the longest random wait, after the store answers again,
	// before this node charges the states it has not been asked about
	// since (default [DefaultReconcileSpread]; negative: no wait). Nodes
	// coming back together so spread their charges. A state asked about
	// is charged at once, before the store decides it (after its first
	// decision, for a store without an exactly-once debit).
	Spread time.Duration
}

// reconciler is the reconciliation's state.
type reconciler struct {
	debts   *debts      // nil when off
	once    onceDebiter // the store, if it counts a debit once per id
	stats   reconcileStats
	spread  time.Duration
	running atomic.Bool // the background pass runs
	// leases counts the local fallback's grants since reconcileLeases
	// last listed them; leasesBusy is held while it runs.
	leases     atomic.Int64
	leasesBusy chan struct{}
	// granted names the leases (key, id) the local fallback granted since
	// the running reconcileLeases listed them; nil when none runs. They
	// wait for the next pass.
	grantMu sync.Mutex
	granted map[[2]string]bool
	mu      sync.Mutex // guards closed and wg.Add
	closed  bool       // by Close
	wg      sync.WaitGroup
	quit    chan struct{} // closed by Close
}

// onceDebiter is a store that counts a debit at most once per idempotency
// id. So a charge not known to be counted can be sent again with its id.
// redisstore.Store is one. counted reports whether this call counted it,
// rather than an earlier one with the id.
type onceDebiter interface {
	DebitOnce(ctx context.Context, req redlimit.Request, id string) (res redlimit.Result, counted bool, err error)
}

// debts is what this node owes the store, per state.
type debts struct {
	*boundedMap[debt]
	n    atomic.Int64 // entries, read without a lock on the store call's path
	mono mono
}

// debt is what a state owes: units not yet in a charge, and a charge in
// doubt. Times are nanoseconds of the Limiter's mono.
type debt struct {
	limit redlimit.Limit // the store's limit (not this node's share), as last used
	units int64          // at most redlimit.MaxCost
	last  int64          // when the last of units was counted
	acc   accrual        // what of units the store would still hold
	doubt *charge        // sent, not known to be counted: to be sent again with its id
	busy  bool           // a charge of the state is being sent
	// wait, made by a call that waits for the charge being sent, is
	// closed when its status is recorded.
	wait chan struct{}
}

// charge is a debit of one state, sent or to be sent.
type charge struct {
	key   string
	limit redlimit.Limit
	units int64
	last  int64  // when its last unit was counted
	at    int64  // when it was taken: its units are what was due then
	id    string // its idempotency id; "" for a store without DebitOnce
	again bool   // sent before, not known to be counted
}

// doubtBytes is what a charge in doubt is counted for in the debts' bytes.
const doubtBytes = 128

// expired reports whether a charge in doubt is too old to be sent again at
// now. Its last unit was counted at last. It expires after a period,
// within the life of its id's marker in the store.
func expired(limit redlimit.Limit, last, now int64) bool { return now-last >= int64(limit.Period) }

// stale reports whether nothing of d can be charged any more.
func (d *debt) stale(now int64) bool {
	return !d.busy && d.acc.due(d.limit, d.units, d.last, now) == 0 &&
		(d.doubt == nil || expired(d.doubt.limit, d.doubt.last, now))
}

func newDebts(size, maxBytes int, m mono) *debts {
	return &debts{boundedMap: newBoundedMap(size, maxBytes, func(d *debt, now time.Time) bool { return d.stale(m.ns(now)) }), mono: m}
}

// reconcileStats are the counters of Reconciliation, in units.
type reconcileStats struct {
	charged, unconfirmed, recovered, replayed, dropped, expired atomic.Int64
}

// Reconciliation counts, in units of cost, what a Limiter owed the store
// for what it counted by itself while the store failed, and what became of
// it (see ReconcileOptions).
type Reconciliation struct {
	Owed    int   // states with a debt: units to charge, in doubt, or being charged
	Charged int64 // units of charges the store confirmed (after a retry included)
	// Unconfirmed counts the units of every try of a charge not known to
	// be counted (a timeout, a reply lost with its connection): a charge
	// that failed twice counts twice. With a store that counts a debit at
	// most once per id (redisstore.Store) they are sent again; see
	// Recovered. With another store they are not, and may or may not have
	// been counted (a charge sent to a frozen Redis is applied when it
	// resumes).
	Unconfirmed int64
	// Recovered counts the units of charges in doubt that a retry with
	// their id confirmed (each once; within Charged).
	Recovered int64
	// Replayed counts, of Recovered, the units whose first try had been
	// counted by the store after all: the retry counted nothing.
	Replayed int64
	Dropped  int64 // units not recorded: the bound was reached
	// Expired counts the units not charged. Some the store's state would
	// have drained since they were counted here (see accrual). Others are
	// of a charge in doubt, not sent again a period after its last unit.
	Expired int64
}

// Reconciliation returns the reconciliation's counters; zero when it is off.
func (l *Limiter) Reconciliation() Reconciliation {
	if l.rec.debts == nil {
		return Reconciliation{}
	}
	return Reconciliation{
		Owed:        int(l.rec.debts.n.Load()),
		Charged:     l.rec.stats.charged.Load(),
		Unconfirmed: l.rec.stats.unconfirmed.Load(),
		Recovered:   l.rec.stats.recovered.Load(),
		Replayed:    l.rec.stats.replayed.Load(),
		Dropped:     l.rec.stats.dropped.Load(),
		Expired:     l.rec.stats.expired.Load(),
	}
}

// add records that n units of key under limit (the store's limit) were
// counted at now by this node alone.
func (ds *debts) add(key string, limit redlimit.Limit, n int64, nodes int, full int64, now time.Time, st *reconcileStats) {
	k := limit.StateID(key)
	at := ds.mono.ns(now)
	sh := ds.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if d, ok := sh.m[k]; ok {
		d.acc.add(limit, nodes, d.units, d.last, n, at, full)
		d.limit, d.units, d.last = limit, min(redlimit.MaxCost, d.units+n), at
		sh.m[k] = d
		return
	}
	size := sizeOf(k)
	if len(sh.m) >= ds.max || sh.bytes+size > ds.maxBytes {
		seen := 0
		for k, d := range sh.m {
			if d.stale(at) {
				ds.drop(sh, k, &d, st)
			}
			if seen++; seen == 8 {
				break
			}
		}
		if len(sh.m) >= ds.max || sh.bytes+size > ds.maxBytes {
			st.dropped.Add(n)
			return
		}
	}
	d := debt{limit: limit, units: min(redlimit.MaxCost, n), last: at}
	d.acc.add(limit, nodes, 0, 0, n, at, full)
	sh.m[k] = d
	sh.bytes += size
	ds.n.Add(1)
}

// forgive takes up to n units of key under limit off what is owed and not
// yet taken into a charge (a Refund of what the local fallback admitted).
func (ds *debts) forgive(key string, limit redlimit.Limit, n int64) {
	k := limit.StateID(key)
	sh := ds.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d, ok := sh.m[k]
	if !ok {
		return
	}
	d.units -= min(n, d.units)
	if d.units == 0 && d.doubt == nil && !d.busy {
		ds.removeLocked(sh, k, &d)
		return
	}
	sh.m[k] = d
}

// forget drops what is owed for the state of key and limit (a Reset of
// it), but a charge being sent, which is recorded as it would have been.
func (ds *debts) forget(key string, limit redlimit.Limit) {
	k := limit.StateID(key)
	sh := ds.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d, ok := sh.m[k]
	if !ok {
		return
	}
	if d.busy {
		d.units = 0
		if d.doubt != nil {
			d.doubt = nil
			sh.bytes -= doubtBytes
		}
		sh.m[k] = d
		return
	}
	ds.removeLocked(sh, k, &d)
}

// drop removes the stale entry k, d of sh, whose lock the caller holds,
// counting its units as expired.
func (ds *debts) drop(sh *mapShard[debt], k redlimit.StateID, d *debt, st *reconcileStats) {
	st.expired.Add(d.units)
	if d.doubt != nil {
		st.expired.Add(d.doubt.units)
	}
	ds.removeLocked(sh, k, d)
}

// removeLocked removes the entry k, d of sh, whose lock the caller holds,
// and the bytes of its charge in doubt, if any.
func (ds *debts) removeLocked(sh *mapShard[debt], k redlimit.StateID, d *debt) {
	if d.doubt != nil {
		sh.bytes -= doubtBytes
	}
	ds.remove(sh, k)
	ds.n.Add(-1)
}

// stateCharge is what is sent for one state: its charge in doubt, then its
// units owed (either may be nil).
type stateCharge struct {
	id    redlimit.StateID
	doubt *charge
	fresh *charge
}

// takeFor takes the states of reqs that owe something and have no charge
// being sent. It returns them, and a channel for each state of reqs with
// a charge being sent. The channel is closed when that charge is recorded.
func (ds *debts) takeFor(reqs []redlimit.Request, now time.Time, once bool, st *reconcileStats) ([]stateCharge, []chan struct{}) {
	var out []stateCharge
	var waits []chan struct{}
	for _, r := range reqs {
		k := r.StateID()
		sh := ds.shard(r.Key)
		sh.mu.Lock()
		if d, ok := sh.m[k]; ok {
			if d.busy {
				if d.wait == nil {
					d.wait = make(chan struct{})
					sh.m[k] = d
				}
				waits = append(waits, d.wait)
			} else if j, ok := ds.takeLocked(sh, k, &d, ds.mono.ns(now), once, st); ok {
				out = append(out, j)
			}
		}
		sh.mu.Unlock()
	}
	return out, waits
}

// take takes up to max states, starting at shard from, as takeFor does.
func (ds *debts) take(max, from int, now time.Time, once bool, st *reconcileStats) []stateCharge {
	var out []stateCharge
	for i := range ds.shards {
		sh := &ds.shards[(from+i)%len(ds.shards)]
		sh.mu.Lock()
		for k, d := range sh.m {
			if len(out) == max {
				break
			}
			if d.busy {
				continue
			}
			if j, ok := ds.takeLocked(sh, k, &d, ds.mono.ns(now), once, st); ok {
				out = append(out, j)
			}
		}
		sh.mu.Unlock()
		if len(out) == max {
			break
		}
	}
	return out
}

// takeLocked takes what the entry k, d of sh owes, leaving the
// entry busy, or drops it if nothing of it can be charged any more. An id
// is made for its units when the store counts debits once per id. The
// caller holds sh's lock.
func (ds *debts) takeLocked(sh *mapShard[debt], k redlimit.StateID, d *debt, now int64, once bool, st *reconcileStats) (stateCharge, bool) {
	j := stateCharge{id: k}
	if c := d.doubt; c != nil {
		if expired(c.limit, c.last, now) {
			st.expired.Add(c.units)
		} else {
			j.doubt = c
		}
		d.doubt = nil
		sh.bytes -= doubtBytes
	}
	if d.units > 0 {
		due := d.acc.due(d.limit, d.units, d.last, now)
		st.expired.Add(d.units - due)
		if due > 0 {
			j.fresh = &charge{key: k.Key, limit: d.limit, units: due, last: d.last, at: now}
			if once {
				j.fresh.id = rand.Text()
			}
		}
		d.units = 0
	}
	if j.doubt == nil && j.fresh == nil {
		ds.removeLocked(sh, k, d) // its doubt taken above
		return j, false
	}
	d.busy = true
	sh.m[k] = *d
	return j, true
}

// chargeStatus is what became of a charge.
type chargeStatus int

const (
	unsent    chargeStatus = iota // not sent, or the store says it did not run
	confirmed                     // the store counted it (or had, under its id)
	inDoubt                       // sent, not known to be counted
)

// record notes what became of j's charges (doubt's and fresh's)
// and makes its state free to be charged again.
func (ds *debts) record(j stateCharge, doubt, fresh chargeStatus, st *reconcileStats) {
	sh := ds.shard(j.id.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d, ok := sh.m[j.id]
	if !ok {
		return // not reached: a busy entry is never removed
	}
	d.busy = false
	if d.wait != nil {
		close(d.wait)
		d.wait = nil
	}
	if j.doubt != nil && doubt != confirmed {
		// Sent before, not known to be counted: only its id may be sent.
		d.doubt = j.doubt
	}
	if c := j.fresh; c != nil {
		switch {
		case fresh == unsent:
			// What was due when it was taken, owed again from then.
			d.acc.add(c.limit, int(d.acc.nodes), d.units, d.last, c.units, c.at, math.MaxInt64)
			if d.units == 0 {
				d.limit, d.last = c.limit, c.at
			}
			d.last = max(d.last, c.at)
			d.units = min(redlimit.MaxCost, d.units+c.units)
		case fresh == inDoubt && c.id != "":
			// The doubt, if any, was confirmed before fresh was sent.
			c.again = true
			d.doubt = c
		}
	}
	if d.doubt != nil {
		sh.bytes += doubtBytes
	}
	if d.units == 0 && d.doubt == nil {
		ds.removeLocked(sh, j.id, &d)
		return
	}
	sh.m[j.id] = d
}

// owe records that this node counted n units of key under limit by itself.
func (l *Limiter) owe(key string, limit redlimit.Limit, n int64) {
	if l.rec.debts == nil {
		return
	}
	// Not known: full, as the local fallback takes a state it has not
	// seen to be.
	full := int64(math.MinInt64)
	if l.local.seen != nil {
		if at, ok := l.local.seen.fullAt(key, limit); ok {
			full = at
		}
	}
	l.rec.debts.add(key, limit, n, l.local.nodes.Nodes(), full, l.now(), &l.rec.stats)
}

// decideOwed makes the call c, which decides the states of owed. This
// node owes something for some of them (see the top of this file).
//
// When the store counts debits once per id, decideOwed sends the charges
// of the states with no charge being sent. It waits for the charges being
// sent of the others, by another call or the background pass. It makes
// the call once nothing is owed for any of them.
//
// When the store counts each charge at most once, it takes the charges,
// makes the call, and sends them if the call succeeded. With charges of
// another call to wait for, it waits first, holding none.
//
// It returns the first charge's error. The states then stay owed, and the
// failure policy answers, as during an outage. It returns ctx's error if
// ctx ends while waiting. c.held then stays set: the breaker ignores a
// call that ran out of time behind another's charge. It returns an
// error if a wait or charge ended after c.end, the end of the call's
// deadline. The caller has had the failure policy's answer then. The store
// must not decide a request no one waits for.
func (l *Limiter) decideOwed(ctx context.Context, c storeCall, owed []redlimit.Request) (redlimit.Decision, error) {
	for {
		charges, waits := l.rec.debts.takeFor(owed, l.now(), l.rec.once != nil, &l.rec.stats)
		switch {
		case len(charges) == 0 && len(waits) == 0:
			return c.call(ctx, l)
		case l.rec.once == nil && len(waits) == 0:
			// One decision per state and node without the debt: a charge
			// sent first to a store that is failing (a Cluster master
			// failing over) would be lost.
			d, err := c.call(ctx, l)
			if err != nil {
				l.unsent(charges)
				return d, err
			}
			for i, j := range charges {
				if err := l.send(ctx, j); err != nil {
					l.unsent(charges[i+1:])
					l.kick() // for what is owed still
					break
				}
			}
			return d, nil
		case l.rec.once == nil:
			l.unsent(charges)
			charges = nil
		}
		for i, j := range charges {
			if err := l.send(ctx, j); err != nil {
				l.unsent(charges[i+1:])
				return redlimit.Decision{}, fmt.Errorf("charging what was counted locally: %w", err)
			}
		}
		if len(waits) > 0 && c.held != nil {
			c.held.Store(true)
		}
		for _, w := range waits {
			select {
			case <-w:
			case <-ctx.Done():
				return redlimit.Decision{}, fmt.Errorf("waiting for a charge of the state: %w", ctx.Err())
			}
		}
		if c.held != nil {
			c.held.Store(false)
		}
		if time.Now().After(c.end) {
			return redlimit.Decision{}, fmt.Errorf("charged after the call's deadline: %w", context.DeadlineExceeded)
		}
	}
}

// send sends j's charges, the one in doubt first, each in a call of its
// own, and returns the first error, after which nothing more is sent.
func (l *Limiter) send(ctx context.Context, j stateCharge) error {
	doubt, fresh := unsent, unsent
	var err error
	if j.doubt != nil {
		doubt, err = l.charge(ctx, j.doubt)
	}
	if err == nil && j.fresh != nil {
		fresh, err = l.charge(ctx, j.fresh)
	}
	l.rec.debts.record(j, doubt, fresh, &l.rec.stats)
	return err
}

// unsent gives back charges taken and not sent.
func (l *Limiter) unsent(charges []stateCharge) {
	for _, j := range charges {
		l.rec.debts.record(j, unsent, unsent, &l.rec.stats)
	}
}

// charge sends c to the store in a call of its own, with Options.Timeout
// whatever the caller's deadline. A charge cut off by a caller that gave
// up would be in doubt. It counts its status and returns it with the
// store's error. One state is one script call, which the store may tell
// did not run. A charge of several states in one call would make a
// failure of one slot's master (a Cluster failover) leave every state of
// the call in doubt.
func (l *Limiter) charge(ctx context.Context, c *charge) (chargeStatus, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	req := redlimit.Request{Key: c.key, Limit: c.limit, Cost: c.units, Debit: true}
	counted := true
	var err error
	if c.id != "" {
		_, counted, err = l.rec.once.DebitOnce(cctx, req, c.id)
	} else {
		_, err = l.store.AllowAll(cctx, []redlimit.Request{req})
	}
	switch {
	case err == nil:
		l.rec.stats.charged.Add(c.units)
		if c.again {
			l.rec.stats.recovered.Add(c.units)
			if !counted {
				l.rec.stats.replayed.Add(c.units)
			}
		}
		return confirmed, nil
	case c.again:
		// Only its id may be sent, whatever this try says.
		l.rec.stats.unconfirmed.Add(c.units)
		return inDoubt, err
	}
	if na, ok := l.store.(notApplier); ok && na.NotApplied(err) {
		return unsent, err
	}
	l.rec.stats.unconfirmed.Add(c.units)
	if c.id == "" {
		l.log.Warn("redlimit: charging what was counted locally failed, not known to be counted, not retried", "units", c.units, "err", err)
	} else {
		l.log.Warn("redlimit: charging what was counted locally failed, not known to be counted, to be retried with its id", "units", c.units, "err", err)
	}
	return inDoubt, err
}

// notApplier is a store that can tell, from the error of a call that ran
// one script call, that the call did not run (redisstore.Store is one).
type notApplier interface {
	NotApplied(err error) bool
}

// kick starts the background reconciliation if something is owed and it is
// not running; called after the store answered.
func (l *Limiter) kick() { l.kickAfter(0) }

// kickAfter is kick for a pass that waits a random time up to wait, then
// up to the spread, before its first charge.
func (l *Limiter) kickAfter(wait time.Duration) {
	if (l.rec.debts == nil || l.rec.debts.n.Load() == 0) && l.rec.leases.Load() == 0 || l.rec.running.Load() {
		return
	}
	l.rec.mu.Lock()
	defer l.rec.mu.Unlock()
	if l.rec.closed || !l.rec.running.CompareAndSwap(false, true) {
		return
	}
	l.rec.wg.Add(1)
	go l.reconcile(wait)
}

// reconcile charges what is owed, in batches, as described above. After
// a charge failed it waits (see retryPause). Then it goes on from the next
// shard, while the breaker stays closed. So a charge in doubt is sent
// again even if no call to the store follows (a key the deny cache
// answers).
func (l *Limiter) reconcile(wait time.Duration) {
	defer l.rec.wg.Done()
	defer func() {
		l.rec.running.Store(false)
		// What is still owed starts another pass. That is the units owed
		// after the pass's last take, or held by another charge then. With
		// the breaker open, it is all of it. The pass starts after a random
		// wait up to retryPause and the spread. Once the traffic has
		// stopped, no store answer may come to start it. With exactly-once
		// charges this goes on while the breaker is open. So its cool-down
		// ends (mayCharge) and a charge probes.
		if l.rec.once != nil || l.mayCharge() {
			l.kickAfter(retryPause)
		}
	}()
	// The local leases first, unspread: Redis grants their slots again
	// until it has them.
	if !l.pause(wait) || l.reconcileLeases(context.Background(), "") != nil || l.rec.debts == nil || !l.pause(l.rec.spread) {
		return
	}
	from := mrand.N(len(l.rec.debts.shards))
	for {
		if !l.mayCharge() {
			return // the next answer of the store starts it again
		}
		// A batch, taken one state at a time: a state taken is busy,
		// and holds the calls that decide it, until its charge is
		// recorded (see decideOwed).
		wait := l.rec.spread / 50
		for range redlimit.MaxRequests {
			taken := l.rec.debts.take(1, from, l.now(), l.rec.once != nil, &l.rec.stats)
			if len(taken) == 0 {
				return
			}
			done, err := l.breaker.Allow()
			if err != nil {
				// Refused by the breaker: not sent.
				l.unsent(taken)
				return
			}
			err = l.send(context.Background(), taken[0])
			done(err)
			if err != nil {
				wait, from = max(l.rec.spread, retryPause), (from+1)%len(l.rec.debts.shards)
				break
			}
		}
		if !l.pause(wait) {
			return
		}
	}
}

// mayCharge reports whether the background reconciliation may send a
// charge. It may while the breaker is closed. When charges are exactly
// once (the store has DebitOnce), it may while half-open too. The charge
// is then the breaker's probe. After an outage at the end of the traffic,
// no call would come to close the breaker. What is owed would then wait
// for ever. A probe sent to a store still down is in doubt, and sent
// again.
func (l *Limiter) mayCharge() bool {
	switch l.breaker.State() {
	case gobreaker.StateClosed:
		return true
	case gobreaker.StateHalfOpen:
		return l.rec.once != nil
	}
	return false
}

// retryPause is the longest random wait of the background reconciliation
// after a charge failed, when ReconcileOptions.Spread is shorter.
const retryPause = 100 * time.Millisecond

// pause waits a random time up to d, and reports false if the Limiter is
// closed meanwhile.
func (l *Limiter) pause(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(mrand.N(d) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.rec.quit:
		return false
	}
}
