package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/micros"
)

// Defaults of the options.
const (
	// DefaultMaxKeys is the default bound on states, about a million.
	DefaultMaxKeys = 1 << 20
	// DefaultMaxBytes is the default bound on the states' estimated memory,
	// 1 GiB. DefaultMaxKeys binds first for ordinary keys and small
	// sliding logs. This bound binds when keys are long or logs large.
	// docs/BENCHMARKS.md gives the sizes. The process's heap may reach
	// about twice what the store holds (Go's GOGC=100).
	DefaultMaxBytes = 1 << 30
	// DefaultSweepInterval is how often the sweeper removes idle states.
	DefaultSweepInterval = time.Minute
)

// Store is an in-process [redlimit.Limiter]. It is safe for concurrent use:
// finding a key takes no lock (a [sync.Map]), and each key has its own
// lock, so unrelated keys never contend. Create one with [New] and Close it
// when done.
type Store struct {
	keys      sync.Map     // string → *slot
	sample    sampler      // the slots that hold states, for eviction
	n         atomic.Int64 // states held or claimed
	bytes     atomic.Int64 // their estimated size (size.go), held or claimed
	refused   atomic.Uint64
	ids       atomic.Uint64 // the last entry's id
	max       int64
	maxBytes  int64
	overMax   int64 // the bounds debits may reach (debitBound)
	overBytes int64
	now       func() time.Time // nil: the monotonic clock from base
	base      time.Time        // with its monotonic reading
	baseMicro int64            // base in µs since the Unix epoch
	sweep     time.Duration
	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	leases    leases // the leases of concurrency limits (lease.go)
}

var _ redlimit.Limiter = (*Store)(nil)

// slot holds one key's states: a short chain of entries, one per
// (algorithm, period) the key is limited by. A slot is in the store's map
// and its sampler while it holds an entry. A slot made for a decision
// that made no entry is removed when it is unlocked.
type slot struct {
	mu    sync.Mutex
	head  *entry
	key   string // the map's key
	pos   int    // index in the sampler's shard, guarded by the shard's lock
	shard uint8  // the sampler's shard, fixed at creation
	dead  bool   // removed from the map: lockers must look the key up again
}

// find returns the entry for (alg, period, cal), or nil.
func (sl *slot) find(alg redlimit.Algorithm, period time.Duration, cal redlimit.Calendar) *entry {
	cal = cal.Canonical()
	for e := sl.head; e != nil; e = e.next {
		if e.p.alg == alg && us(e.p.window) == period && e.p.cal == cal {
			return e
		}
	}
	return nil
}

// remove unlinks e from the chain.
func (sl *slot) remove(e *entry) {
	if sl.head == e {
		sl.head = e.next
		return
	}
	for p := sl.head; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			return
		}
	}
}

// Option configures a Store.
type Option func(*Store) error

// WithClock makes the store read the time from now instead of the monotonic
// clock.
// Tests use it to decide over fixed instants without sleeping. now must be
// safe for concurrent use: the background sweeper calls it too
// (redlimittest.Clock is).
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		if now == nil {
			return fmt.Errorf("memory: WithClock(nil)")
		}
		s.now = now
		return nil
	}
}

// WithMaxKeys bounds how many (key, limit) states the store holds (default
// [DefaultMaxKeys]). Only debits take it beyond, by an eighth at most. A
// decision that would make a state beyond the bound first evicts idle
// states from a random sample of keys. Idle states no longer hold
// anything (see the package documentation). If that finds no room, the
// request (or Peek) is denied. Its RetryAfter is when a sampled state
// becomes idle, and it is counted in [Stats].Refused. A debit is counted
// all the same, up to an eighth beyond the bound (at least one state).
// Past that its decision fails with [ErrFull]. A state that holds
// consumption is never evicted. A full store denies new keys rather than
// forget what a key has consumed. Keys that have their state are decided
// as usual.
func WithMaxKeys(n int) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("memory: WithMaxKeys(%d): must be at least 1", n)
		}
		s.max = int64(n)
		return nil
	}
}

// WithMaxBytes bounds the estimated memory of the store's states and
// leases (default [DefaultMaxBytes]). The estimate counts the keys, a
// share per key and per state, and the buffers of sliding logs. It
// counts the refund records that [Store.Admit] made in token buckets.
// It counts each lease and its id too (see size.go). A decision may go
// beyond it: a new state, or a sliding log whose buffer must grow. It
// then evicts and, failing that, is denied as under [WithMaxKeys]. Debits
// and records of leases ([redlimit.RecordLease]) may go an eighth beyond.
// The process's heap may be about twice the bound. The garbage collector
// lets garbage reach the live heap's size by default.
func WithMaxBytes(n int64) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("memory: WithMaxBytes(%d): must be at least 1", n)
		}
		s.maxBytes = n
		return nil
	}
}

// WithSweepInterval sets how often a background goroutine removes idle
// states (default [DefaultSweepInterval]). 0 or less turns the sweeper
// off. Idle states are then only removed when eviction samples them.
func WithSweepInterval(d time.Duration) Option {
	return func(s *Store) error {
		s.sweep = d
		return nil
	}
}

// New returns a Store. Without options it reads the clock itself, holds at
// most [DefaultMaxKeys] states and [DefaultMaxBytes] bytes, and sweeps idle
// states every [DefaultSweepInterval]. It returns an error only for an
// invalid option.
func New(opts ...Option) (*Store, error) {
	s := &Store{base: time.Now(), max: DefaultMaxKeys, maxBytes: DefaultMaxBytes, sweep: DefaultSweepInterval}
	s.baseMicro = s.base.UnixMicro()
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.overMax, s.overBytes = debitBound(s.max), debitBound(s.maxBytes)
	if s.sweep > 0 {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
		go s.sweepEvery(s.sweep)
	}
	return s, nil
}

// Close stops the background sweeper and waits for it. Calls after Close
// return [redlimit.ErrClosed]. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// Len returns how many states the store holds, one per key and limit, idle
// ones included until they are swept or evicted.
func (s *Store) Len() int { return int(s.n.Load()) }

// Stats is a snapshot of a Store's use of its bounds, for metrics.
type Stats struct {
	// States is how many states the store holds, as [Store.Len].
	States int64
	// Bytes is their estimated memory, and the leases', as [WithMaxBytes]
	// counts it.
	Bytes int64
	// Refused counts the decisions, checks (Peek) and new leases denied
	// since [New] because the store had no room for a state or lease they
	// would have made or grown. A store that refuses is too small for its
	// keys, or under a flood of new keys.
	Refused uint64
}

// Stats returns the store's figures now. Decisions in flight may count in
// States and Bytes already.
func (s *Store) Stats() Stats {
	return Stats{States: s.n.Load(), Bytes: s.bytes.Load(), Refused: s.refused.Load()}
}

// micros returns the time in µs since the Unix epoch, within the range the
// store computes with (see internal/micros). Without WithClock it reads the
// monotonic clock (cheaper than the wall clock) from the wall time the
// store was made at.
func (s *Store) micros() int64 {
	if s.now != nil {
		return micros.Of(s.now())
	}
	return micros.Clamp(s.baseMicro + int64(time.Since(s.base)/time.Microsecond))
}

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("memory: %w", redlimit.ErrClosed)
	}
	return ctx.Err()
}

// lock returns key's slot, locked and live, making it if needed. Unlock it
// with [Store.unlock].
func (s *Store) lock(key string) *slot {
	for {
		v, ok := s.keys.Load(key)
		if !ok {
			// Made locked, so that no one sees it before it is decided on.
			sl := &slot{key: key, shard: uint8(rand.IntN(sampleShards))}
			sl.mu.Lock()
			var loaded bool
			if v, loaded = s.keys.LoadOrStore(key, sl); !loaded {
				return sl
			}
		}
		sl := v.(*slot)
		sl.mu.Lock()
		if !sl.dead {
			return sl
		}
		sl.mu.Unlock()
	}
}

// unlock unlocks sl, first removing it from the store if it holds no state
// (made for a request that was denied), so that a denial leaves nothing
// behind.
func (s *Store) unlock(sl *slot) {
	if sl.head == nil && !sl.dead {
		sl.dead = true
		s.keys.CompareAndDelete(sl.key, sl)
	}
	sl.mu.Unlock()
}

// AllowN implements [redlimit.Limiter]. It allocates nothing once a key has
// been seen.
func (s *Store) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (res redlimit.Result, err error) {
	// Small enough to inline, so that a caller's result is written in place.
	err = s.allowN(ctx, key, &limit, n, &res)
	return res, err
}

func (s *Store) allowN(ctx context.Context, key string, limit *redlimit.Limit, n int64, res *redlimit.Result) error {
	// The common case: a key with a state for this algorithm and period.
	// Its parameters were made from this count and burst, so the limit is
	// valid. A commit cannot change its size. Anything else, errors
	// included, takes the full path.
	if key != "" && n >= 1 && n <= redlimit.MaxCost && !s.closed.Load() && ctx.Err() == nil {
		if v, ok := s.keys.Load(key); ok {
			sl := v.(*slot)
			sl.mu.Lock()
			if e := sl.find(limit.Algorithm, limit.Period, limit.Calendar); e != nil && e.p.same(limit) && !e.grows(&e.p, n) {
				now := s.micros()
				if w := check(e, &e.p, now, n, res); res.Allowed {
					commit(e, &e.p, now, n, w)
				}
				sl.mu.Unlock()
				return nil
			}
			sl.mu.Unlock()
		}
	}
	return s.allowSlow(ctx, key, *limit, n, res, nil)
}

// allowSlow decides a request, or queues it when q is not nil, making
// room for the state it writes.
func (s *Store) allowSlow(ctx context.Context, key string, limit redlimit.Limit, n int64, res *redlimit.Result, q *queued) error {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		*res = redlimit.Result{}
		return fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		*res = redlimit.Result{}
		return err
	}
	p := newParams(limit)
	if _, ok := s.keys.Load(key); !ok {
		// A key with no state that cannot pass makes none: a stream of
		// requests too costly for their limit costs no memory.
		if decide(nil, &p, s.micros(), n, res, q); !res.Allowed {
			return nil
		}
	}
	var soonest int64
	for final := false; ; final = true {
		sl := s.lock(key)
		now := s.micros()
		e := sl.find(limit.Algorithm, limit.Period, limit.Calendar)
		w := decide(e, &p, now, n, res, q)
		if !res.Allowed {
			if e != nil {
				e.p = p // the count or burst may have changed
			}
			s.unlock(sl)
			return nil
		}
		var need room
		need.addEntry(e, &p, now, n, false)
		need.addSlot(sl)
		if s.claim(need) {
			s.trueUp(need, s.put(sl, e, &p, now, n, w, false))
			s.unlock(sl)
			return nil
		}
		if final {
			s.refuse(res, e, now, need, soonest)
			s.refused.Add(1)
			s.unlock(sl)
			return nil
		}
		// Eviction tries other keys' locks: only with ours released.
		s.unlock(sl)
		soonest = s.evict(now, need)
	}
}

// Allow is AllowN with a cost of 1.
func (s *Store) Allow(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	return s.AllowN(ctx, key, limit, 1)
}

// Peek implements [redlimit.Limiter]. A request the store has no room
// for is refused, as AllowN would refuse it: a check passes only if the
// request could be counted. Peek evicts idle states to make room, as
// AllowN does, which changes no answer.
func (s *Store) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Result{}, err
	}
	p := newParams(limit)
	var res redlimit.Result
	var soonest int64
	for final := false; ; final = true {
		need, now, done := s.peek(key, &p, n, &res, final, soonest)
		if done {
			return res, nil
		}
		soonest = s.evict(now, need)
	}
}

// peek checks a request of cost n under p for key into res. It reports
// whether it is decided. It is not when the store has no room for what it
// would make and final is false. The caller then evicts and asks again
// with final set. A store still full refuses it. peek returns the room
// the request needs and the time it was checked at.
func (s *Store) peek(key string, p *params, n int64, res *redlimit.Result, final bool, soonest int64) (room, int64, bool) {
	var e *entry
	var need room
	if v, ok := s.keys.Load(key); ok {
		sl := v.(*slot)
		sl.mu.Lock()
		defer sl.mu.Unlock()
		e = sl.find(p.alg, us(p.window), p.cal)
		need.addSlot(sl)
	} else {
		need.bytes += keySize(key)
	}
	now := s.micros()
	check(e, p, now, n, res)
	need.addEntry(e, p, now, n, false)
	if !res.Allowed || s.fits(need) {
		return need, now, true
	}
	if !final {
		return need, now, false
	}
	s.refuse(res, e, now, need, soonest)
	s.refused.Add(1)
	return need, now, true
}

// Reset implements [redlimit.Limiter].
func (s *Store) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	v, ok := s.keys.Load(key)
	if !ok {
		return nil
	}
	sl := v.(*slot)
	sl.mu.Lock()
	if e := sl.find(limit.Algorithm, limit.Period, limit.Calendar); e != nil {
		s.drop(sl, e)
	}
	sl.mu.Unlock()
	return nil
}

// AllowAll implements [redlimit.Limiter]. It locks the keys of every
// request, in key order, and checks every limit. It commits the admissions
// only if all allow, so the decision is atomic. Debits are committed
// either way, beyond the store's bounds if need be. It returns [ErrFull],
// counting nothing, if even that leaves no room for them.
func (s *Store) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	return s.allowAll(ctx, reqs, nil)
}

// allowAll is AllowAll; when an allowed decision commits, it records in
// wrote, if not nil, what each request wrote (see Admit).
func (s *Store) allowAll(ctx context.Context, reqs []redlimit.Request, wrote []wrote) (redlimit.Decision, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Decision{}, err
	}
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	a := all{
		reqs:  reqs,
		slots: make(map[string]*slot, len(keys)),
		ps:    make([]params, len(reqs)),
		ws:    make([]update, len(reqs)),
		units: make([]int64, len(reqs)),
		d:     redlimit.Decision{Results: make([]redlimit.Result, len(reqs))},
		wrote: wrote,
	}
	for i, r := range reqs {
		a.ps[i] = newParams(r.Limit)
	}
	var soonest int64
	for final := false; ; final = true {
		for _, k := range keys {
			a.slots[k] = s.lock(k)
		}
		need, now, done, err := s.decideAll(&a, final, soonest)
		// Eviction tries other keys' locks: only with none of ours held.
		for _, k := range keys {
			s.unlock(a.slots[k])
		}
		if err != nil {
			return redlimit.Decision{}, err
		}
		if done {
			return a.d, nil
		}
		soonest = s.evict(now, need)
	}
}

// all is the work of an AllowAll.
type all struct {
	reqs  []redlimit.Request
	slots map[string]*slot
	ps    []params
	ws    []update
	units []int64 // what each request counts; 0: nothing to write
	d     redlimit.Decision
	wrote []wrote // nil unless recording for Admit
}

// admits reports whether request i is an admission that Admit records for
// its refund.
func (a *all) admits(i int) bool { return a.wrote != nil && !a.reqs[i].Debit }

// entry returns request i's state, or nil.
func (a *all) entry(i int) *entry {
	r := &a.reqs[i]
	return a.slots[r.Key].find(r.Limit.Algorithm, r.Limit.Period, r.Limit.Calendar)
}

// decideAll decides a.reqs with the keys' slots locked, and reports
// whether it did. It does not when the store has no room for what the
// decision would make and final is false. The caller then evicts, with no
// lock held, and asks again with final set. A store still full refuses
// the admissions that need room. soonest is what that eviction returned.
// decideAll returns the room the decision needs and the time it was made
// at. It returns ErrFull, with nothing counted, if even debitBound leaves
// no room for its debits.
func (s *Store) decideAll(a *all, final bool, soonest int64) (room, int64, bool, error) {
	now := s.micros()
	a.d.Allowed = true
	var unfit, refused uint64 // bits by request: it did not fit; it was refused
	for i, r := range a.reqs {
		a.ws[i] = check(a.entry(i), &a.ps[i], now, r.Cost, &a.d.Results[i])
		a.d.Allowed = a.d.Allowed && a.d.Results[i].Allowed
		if !a.d.Results[i].Allowed {
			unfit |= 1 << i
		}
	}
	// An allowed decision counts every request, a denied one its debits: one
	// that fits as an admission, one that does not up to its bound.
	for i, r := range a.reqs {
		switch {
		case !a.d.Allowed && !r.Debit:
			a.units[i] = 0
		case a.d.Results[i].Allowed:
			a.units[i] = r.Cost
		default:
			a.ws[i], a.units[i] = debitUpdate(a.entry(i), &a.ps[i], now, r.Cost)
			cutBucket(a.entry(i), &a.ps[i], now, r.Cost)
		}
	}
	need := a.room(now)
	if !s.claim(need) {
		if !final {
			return need, now, false, nil
		}
		// The store is full. Each admission that needs room is refused,
		// which denies the decision, and no admission is counted then.
		// Debits are counted all the same, as they record work done: they
		// may take the store beyond its bounds, up to debitBound.
		for i, r := range a.reqs {
			e := a.entry(i)
			if a.units[i] > 0 && !r.Debit && (e == nil || e.sizeAfter(&a.ps[i], now, a.units[i], a.admits(i)) > e.size()) {
				s.refuse(&a.d.Results[i], e, now, need, soonest)
				refused |= 1 << i
			}
		}
		if refused != 0 {
			a.d.Allowed = false
			for i, r := range a.reqs {
				if !r.Debit {
					a.units[i] = 0
				}
			}
		}
		need = a.room(now)
		if !s.claimWithin(need, s.overMax, s.overBytes) {
			return need, now, true, ErrFull
		}
		if refused != 0 {
			s.refused.Add(1)
		}
	}
	var grown int64
	for i, r := range a.reqs {
		if a.units[i] == 0 {
			continue
		}
		sl := a.slots[r.Key]
		grown += s.put(sl, a.entry(i), &a.ps[i], now, a.units[i], a.ws[i], r.Debit)
		if a.wrote != nil {
			var made int64
			a.wrote[i], made = record(a.entry(i), now, a.ws[i].expires, r.Debit)
			grown += made
		}
	}
	s.trueUp(need, grown)
	// A debit that did not fit answers for the key as it now is, in debt.
	for i, r := range a.reqs {
		if r.Debit && (unfit&^refused)&(1<<i) != 0 {
			check(a.entry(i), &a.ps[i], now, r.Cost, &a.d.Results[i])
		}
	}
	return need, now, true, nil
}

// room returns the room a.units need: each state it writes, and the keys
// it gives their first state.
func (a *all) room(now int64) room {
	var need room
	for i := range a.reqs {
		if a.units[i] > 0 {
			need.addEntry(a.entry(i), &a.ps[i], now, a.units[i], a.admits(i))
		}
	}
	for k, sl := range a.slots {
		for i, r := range a.reqs {
			if a.units[i] > 0 && r.Key == k {
				need.addSlot(sl)
				break
			}
		}
	}
	return need
}

// put commits a check's update, or a debit's, to e in sl, or to a new entry
// if e is nil. It returns how many bytes that added to the store. A
// debit's commit may merge a sliding log's entries (ring.merge).
func (s *Store) put(sl *slot, e *entry, p *params, now, n int64, w update, debit bool) int64 {
	var grown int64
	if e == nil {
		if sl.head == nil {
			grown += keySize(sl.key)
			s.sample.add(sl)
		}
		e = &entry{next: sl.head, id: s.ids.Add(1)}
		sl.head = e
	} else {
		grown -= e.size()
	}
	commit(e, p, now, n, w)
	if debit && p.alg == redlimit.SlidingLog {
		e.log.merge(p.count)
	}
	e.p = *p
	return grown + e.size()
}

// drop removes e from sl, whose lock is held, and sl from the store if it
// is left empty.
func (s *Store) drop(sl *slot, e *entry) {
	sl.remove(e)
	s.n.Add(-1)
	freed := e.size()
	if sl.head == nil {
		freed += keySize(sl.key)
		sl.dead = true
		s.keys.CompareAndDelete(sl.key, sl)
		s.sample.remove(sl)
	}
	s.bytes.Add(-freed)
}
