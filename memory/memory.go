package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

const numShards = 64

// Defaults of the options.
const (
	DefaultMaxKeys       = 1 << 20
	DefaultSweepInterval = time.Minute
)

// Store is an in-process [redlimit.Limiter]. It is safe for concurrent use;
// keys are spread over 64 shards, each with its own lock, so unrelated keys
// rarely contend. Create one with [New] and Close it when done.
type Store struct {
	shards      [numShards]shard
	seed        maphash.Seed
	now         func() time.Time
	maxPerShard int
	sweep       time.Duration
	closed      atomic.Bool
	stop        chan struct{}
	done        chan struct{}
	closeOnce   sync.Once
}

var _ redlimit.Limiter = (*Store)(nil)

type shard struct {
	mu sync.Mutex
	m  map[mkey]*entry
	_  [48]byte // keep shards on separate cache lines
}

// mkey names the state of one limit of one key.
type mkey struct {
	key    string
	alg    redlimit.Algorithm
	period time.Duration
}

// Option configures a Store.
type Option func(*Store) error

// WithClock makes the store read the time from now instead of [time.Now].
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

// WithMaxKeys bounds how many (key, limit) states the store holds, rounded up
// to a multiple of 64 (default [DefaultMaxKeys]). When a shard is full, a new
// key first evicts expired states; if none is found among a sample of eight,
// it evicts the sampled state closest to expiring, which forgets what that
// key had consumed.
func WithMaxKeys(n int) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("memory: WithMaxKeys(%d): must be at least 1", n)
		}
		s.maxPerShard = (n + numShards - 1) / numShards
		return nil
	}
}

// WithSweepInterval sets how often a background goroutine removes expired
// states (default [DefaultSweepInterval]); 0 or less turns the sweeper off, and
// expired states are then only replaced when their shard is full.
func WithSweepInterval(d time.Duration) Option {
	return func(s *Store) error {
		s.sweep = d
		return nil
	}
}

// New returns a Store. Without options it reads [time.Now], holds at most
// [DefaultMaxKeys] states and sweeps expired ones every [DefaultSweepInterval].
// It returns an error only for an invalid option.
func New(opts ...Option) (*Store, error) {
	s := &Store{
		seed:        maphash.MakeSeed(),
		now:         time.Now,
		maxPerShard: DefaultMaxKeys / numShards,
		sweep:       DefaultSweepInterval,
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	for i := range s.shards {
		s.shards[i].m = make(map[mkey]*entry)
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

// Len returns how many states the store holds, expired ones included until
// they are swept.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (s *Store) shardIndex(key string) int {
	return int(maphash.String(s.seed, key) % numShards)
}

func (s *Store) micros() int64 { return s.now().UnixMicro() }

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("memory: %w", redlimit.ErrClosed)
	}
	return ctx.Err()
}

// AllowN implements [redlimit.Limiter]. It allocates nothing once a key has
// been seen.
func (s *Store) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Result{}, err
	}
	p := newParams(limit)
	k := mkey{key, limit.Algorithm, limit.Period}
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	now := s.micros()
	e := sh.m[k]
	res, w := check(e, &p, now, n)
	if res.Allowed {
		if e == nil {
			e = s.insert(sh, k, now)
		}
		commit(e, &p, now, n, w)
	}
	sh.mu.Unlock()
	return res, nil
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
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	res, _ := check(sh.m[mkey{key, limit.Algorithm, limit.Period}], &p, s.micros(), n)
	sh.mu.Unlock()
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
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	delete(sh.m, mkey{key, limit.Algorithm, limit.Period})
	sh.mu.Unlock()
	return nil
}

// AllowAll implements [redlimit.Limiter]: it locks the shards of every
// request (in a fixed order), checks every limit, and commits only if all
// allow, so the decision is atomic.
func (s *Store) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return redlimit.Decision{}, err
	}
	var idx [redlimit.MaxRequests]int
	locks := idx[:0]
	for _, r := range reqs {
		locks = append(locks, s.shardIndex(r.Key))
	}
	order := slices.Clone(locks)
	slices.Sort(order)
	order = slices.Compact(order)
	for _, i := range order {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range order {
			s.shards[i].mu.Unlock()
		}
	}()

	now := s.micros()
	d := redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs))}
	ps := make([]params, len(reqs))
	ws := make([]pending, len(reqs))
	for i, r := range reqs {
		ps[i] = newParams(r.Limit)
		d.Results[i], ws[i] = check(s.shards[locks[i]].m[mkey{r.Key, r.Limit.Algorithm, r.Limit.Period}], &ps[i], now, r.Cost)
		d.Allowed = d.Allowed && d.Results[i].Allowed
	}
	if !d.Allowed {
		return d, nil
	}
	for i, r := range reqs {
		sh := &s.shards[locks[i]]
		k := mkey{r.Key, r.Limit.Algorithm, r.Limit.Period}
		e := sh.m[k]
		if e == nil {
			e = s.insert(sh, k, now)
		}
		commit(e, &ps[i], now, r.Cost, ws[i])
	}
	return d, nil
}

// insert adds an empty entry for k to sh, whose lock is held, evicting one
// first if sh is full.
func (s *Store) insert(sh *shard, k mkey, now int64) *entry {
	if len(sh.m) >= s.maxPerShard {
		evict(sh, now)
	}
	e := &entry{}
	sh.m[k] = e
	return e
}

// evict removes the expired entries among a sample of sh's entries, or if
// there are none, the sampled entry closest to expiring.
func evict(sh *shard, now int64) {
	var victim mkey
	soonest := int64(math.MaxInt64)
	removed, seen := false, 0
	for k, e := range sh.m { // map iteration starts at a random entry
		if now >= e.expires {
			delete(sh.m, k)
			removed = true
		} else if e.expires < soonest {
			victim, soonest = k, e.expires
		}
		if seen++; seen == 8 {
			break
		}
	}
	if !removed && soonest != math.MaxInt64 {
		delete(sh.m, victim)
	}
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
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.micros()
		for k, e := range sh.m {
			if now >= e.expires {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}
