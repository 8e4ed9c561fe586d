package memory

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

// Defaults of the options.
const (
	DefaultMaxKeys       = 1 << 20
	DefaultSweepInterval = time.Minute
)

// Store is an in-process [redlimit.Limiter]. It is safe for concurrent use:
// finding a key takes no lock (a [sync.Map]), and each key has its own
// lock, so unrelated keys never contend. Create one with [New] and Close it
// when done.
type Store struct {
	keys      sync.Map     // string → *slot
	n         atomic.Int64 // states held
	max       int64
	now       func() time.Time // nil: the monotonic clock from base
	base      time.Time        // with its monotonic reading
	baseMicro int64            // base in µs since the Unix epoch
	sweep     time.Duration
	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ redlimit.Limiter = (*Store)(nil)

// slot holds one key's states: a short chain of entries, one per
// (algorithm, period) the key is limited by.
type slot struct {
	mu   sync.Mutex
	head *entry
	dead bool // removed from the map: lockers must look the key up again
}

// find returns the entry for (alg, period), or nil.
func (sl *slot) find(alg redlimit.Algorithm, period time.Duration) *entry {
	for e := sl.head; e != nil; e = e.next {
		if e.p.alg == alg && us(e.p.window) == period {
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
// [DefaultMaxKeys]); concurrent first requests of new keys may pass it by
// a few for a moment. A new state beyond the bound first evicts expired
// states; if none is found among a sample of eight keys, it evicts the
// sampled state closest to expiring, which forgets what that key had
// consumed.
func WithMaxKeys(n int) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("memory: WithMaxKeys(%d): must be at least 1", n)
		}
		s.max = int64(n)
		return nil
	}
}

// WithSweepInterval sets how often a background goroutine removes expired
// states (default [DefaultSweepInterval]); 0 or less turns the sweeper off, and
// expired states are then only removed when the store is full.
func WithSweepInterval(d time.Duration) Option {
	return func(s *Store) error {
		s.sweep = d
		return nil
	}
}

// New returns a Store. Without options it reads the clock itself, holds at
// most [DefaultMaxKeys] states and sweeps expired ones every
// [DefaultSweepInterval]. It returns an error only for an invalid option.
func New(opts ...Option) (*Store, error) {
	s := &Store{base: time.Now(), max: DefaultMaxKeys, sweep: DefaultSweepInterval}
	s.baseMicro = s.base.UnixMicro()
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
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

// Len returns how many states the store holds, one per key and limit,
// expired ones included until they are swept.
func (s *Store) Len() int { return int(s.n.Load()) }

// micros returns the time in µs since the Unix epoch. Without WithClock it
// reads the monotonic clock (cheaper than the wall clock) from the wall time
// the store was made at.
func (s *Store) micros() int64 {
	if s.now != nil {
		return s.now().UnixMicro()
	}
	return s.baseMicro + int64(time.Since(s.base)/time.Microsecond)
}

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("memory: %w", redlimit.ErrClosed)
	}
	return ctx.Err()
}

// lock returns key's slot, locked and live, making it if needed.
func (s *Store) lock(key string) *slot {
	for {
		v, ok := s.keys.Load(key)
		if !ok {
			v, _ = s.keys.LoadOrStore(key, &slot{})
		}
		sl := v.(*slot)
		sl.mu.Lock()
		if !sl.dead {
			return sl
		}
		sl.mu.Unlock()
	}
}

// AllowN implements [redlimit.Limiter]. It allocates nothing once a key has
// been seen.
func (s *Store) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (res redlimit.Result, err error) {
	// Small enough to inline, so that a caller's result is written in place.
	err = s.allowN(ctx, key, &limit, n, &res)
	return res, err
}

func (s *Store) allowN(ctx context.Context, key string, limit *redlimit.Limit, n int64, res *redlimit.Result) error {
	// The common case: a key with a state for this algorithm and period,
	// whose parameters were made from this count and burst, so the limit
	// is valid. Anything else, errors included, takes the full path.
	if key != "" && n >= 1 && n <= redlimit.MaxCost && !s.closed.Load() && ctx.Err() == nil {
		if v, ok := s.keys.Load(key); ok {
			sl := v.(*slot)
			sl.mu.Lock()
			if e := sl.find(limit.Algorithm, limit.Period); e != nil && e.p.same(limit) {
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
	return s.allowSlow(ctx, key, *limit, n, res)
}

func (s *Store) allowSlow(ctx context.Context, key string, limit redlimit.Limit, n int64, res *redlimit.Result) error {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		*res = redlimit.Result{}
		return fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		*res = redlimit.Result{}
		return err
	}
	p := newParams(limit)
	var sl *slot
	if v, ok := s.keys.Load(key); ok {
		sl = v.(*slot)
		sl.mu.Lock()
		if sl.dead {
			sl.mu.Unlock()
			sl = s.lock(key)
		}
	} else {
		// A key with no state that cannot pass makes none: a stream of
		// requests too costly for their limit costs no memory.
		if check(nil, &p, s.micros(), n, res); !res.Allowed {
			return nil
		}
		sl = s.lock(key)
	}
	now := s.micros()
	e := sl.find(limit.Algorithm, limit.Period)
	w := check(e, &p, now, n, res)
	added := false
	if res.Allowed {
		if e == nil {
			e = &entry{next: sl.head}
			sl.head = e
			added = true
		}
		commit(e, &p, now, n, w)
	}
	if e != nil {
		e.p = p // the count or burst may have changed
	}
	sl.mu.Unlock()
	if added && s.n.Add(1) > s.max {
		s.evict(now)
	}
	return nil
}

// Allow is AllowN with a cost of 1.
func (s *Store) Allow(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	return s.AllowN(ctx, key, limit, 1)
}

// Peek implements [redlimit.Limiter].
func (s *Store) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Result{}, err
	}
	p := newParams(limit)
	v, ok := s.keys.Load(key)
	if !ok {
		var res redlimit.Result
		check(nil, &p, s.micros(), n, &res)
		return res, nil
	}
	sl := v.(*slot)
	sl.mu.Lock()
	var res redlimit.Result
	check(sl.find(limit.Algorithm, limit.Period), &p, s.micros(), n, &res)
	sl.mu.Unlock()
	return res, nil
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
	if e := sl.find(limit.Algorithm, limit.Period); e != nil {
		s.drop(key, sl, e)
	}
	sl.mu.Unlock()
	return nil
}

// drop removes e from sl, whose lock is held, and sl from the store if it
// is left empty.
func (s *Store) drop(key string, sl *slot, e *entry) {
	sl.remove(e)
	s.n.Add(-1)
	if sl.head == nil {
		sl.dead = true
		s.keys.CompareAndDelete(key, sl)
	}
}

// AllowAll implements [redlimit.Limiter]: it locks the keys of every request
// (in key order), checks every limit, and commits only if all allow, so the
// decision is atomic.
func (s *Store) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
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
	slots := make(map[string]*slot, len(keys))
	for _, k := range keys {
		slots[k] = s.lock(k)
	}
	defer func() {
		for _, sl := range slots {
			sl.mu.Unlock()
		}
	}()

	now := s.micros()
	d := redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs))}
	ps := make([]params, len(reqs))
	ws := make([]pending, len(reqs))
	for i, r := range reqs {
		ps[i] = newParams(r.Limit)
		ws[i] = check(slots[r.Key].find(r.Limit.Algorithm, r.Limit.Period), &ps[i], now, r.Cost, &d.Results[i])
		d.Allowed = d.Allowed && d.Results[i].Allowed
	}
	if !d.Allowed {
		return d, nil
	}
	added := int64(0)
	for i, r := range reqs {
		sl := slots[r.Key]
		e := sl.find(r.Limit.Algorithm, r.Limit.Period)
		if e == nil {
			e = &entry{next: sl.head}
			sl.head = e
			added++
		}
		commit(e, &ps[i], now, r.Cost, ws[i])
		e.p = ps[i]
	}
	if added > 0 && s.n.Add(added) > s.max {
		defer s.evict(now) // after the unlocks, deferred above
	}
	return d, nil
}

// evict removes the expired states of a sample of keys, or if there are
// none, the sampled state closest to expiring. Concurrent evictions tend to
// sample the same keys and choose the same victim, and a sample may hold
// only keys being written (locked) or made: an eviction that removed
// nothing samples again, from a random place, up to eight times in all, while
// the store is still above its bound.
func (s *Store) evict(now int64) {
	for attempt := range 8 {
		skip := 0
		if attempt > 0 {
			skip = rand.IntN(8 * attempt)
		}
		if s.evictOnce(now, skip) || s.n.Load() <= s.max {
			return
		}
	}
}

// evictOnce samples eight keys, after skipping skip keys (taken at the end
// if there are fewer than skip+8), and reports whether it removed a state.
func (s *Store) evictOnce(now int64, skip int) bool {
	var victimKey string
	var victim *slot
	soonest := int64(math.MaxInt64)
	removed, seen, skipped := false, 0, 0
	sample := func(k, v any) bool {
		sl := v.(*slot)
		if !sl.mu.TryLock() {
			return true // busy: not a good victim
		}
		if sl.head == nil { // being made, or left by a denial: not a sample
			sl.mu.Unlock()
			return true
		}
		for e := sl.head; e != nil; e = e.next {
			if now >= e.expires {
				s.drop(k.(string), sl, e)
				removed = true
			} else if e.expires < soonest {
				soonest, victimKey, victim = e.expires, k.(string), sl
			}
		}
		sl.mu.Unlock()
		seen++
		return seen < 8
	}
	s.keys.Range(func(k, v any) bool {
		if skipped < skip {
			skipped++
			return true
		}
		return sample(k, v)
	})
	if seen < 8 && skipped > 0 { // the end came first: wrap around
		n := 0
		s.keys.Range(func(k, v any) bool {
			if n++; n > skipped {
				return false
			}
			return sample(k, v)
		})
	}
	if removed || victim == nil {
		return removed
	}
	dropped := false
	victim.mu.Lock()
	if !victim.dead {
		for e := victim.head; e != nil; e = e.next {
			if e.expires == soonest {
				s.drop(victimKey, victim, e)
				dropped = true
				break
			}
		}
	}
	victim.mu.Unlock()
	return dropped
}

func (s *Store) sweepEvery(d time.Duration) {
	defer close(s.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep removes every expired state now. The background sweeper calls it;
// callers rarely need to.
func (s *Store) Sweep() {
	s.keys.Range(func(k, v any) bool {
		sl := v.(*slot)
		sl.mu.Lock()
		now := s.micros()
		for e := sl.head; e != nil; e = e.next {
			if now >= e.expires {
				s.drop(k.(string), sl, e)
			}
		}
		if sl.head == nil && !sl.dead { // a slot made for a request that was not allowed
			sl.dead = true
			s.keys.CompareAndDelete(k, sl)
		}
		sl.mu.Unlock()
		return true
	})
}
