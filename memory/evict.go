package memory

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

// Eviction samples sampleRounds times sampleSize slots at random, at most.
const (
	sampleShards = 64
	sampleSize   = 8
	sampleRounds = 8
)

// idle reports whether e holds no information at now. A Peek of cost 1
// would answer exactly as if e were absent: its window has passed, its log
// aged out, its bucket refilled. Only an idle state may be evicted or
// swept: forgetting it changes no answer.
func idle(e *entry, now int64) bool {
	if now >= e.expires {
		return true
	}
	var with, without redlimit.Result
	check(e, &e.p, now, 1, &with)
	check(nil, &e.p, now, 1, &without)
	return with == without
}

// room is what a decision adds to a store: states and estimated bytes.
type room struct{ states, bytes int64 }

// addEntry counts the room a commit of cost n under p at now to e (nil: a
// new state) takes at most; admit as sizeAfter says.
func (r *room) addEntry(e *entry, p *params, now, n int64, admit bool) {
	if e == nil {
		r.states++
		r.bytes += e.sizeAfter(p, now, n, admit)
		return
	}
	r.bytes += e.sizeAfter(p, now, n, admit) - e.size()
}

// addSlot counts the room sl takes once a decision commits to it: its key,
// if it holds no state yet.
func (r *room) addSlot(sl *slot) {
	if sl.head == nil {
		r.bytes += keySize(sl.key)
	}
}

// claim takes need from the store's bounds and reports whether it fit.
// A decision claims before it commits, so the store never holds more
// than its bounds (as estimated), whatever the concurrency.
func (s *Store) claim(need room) bool { return s.claimWithin(need, s.max, s.maxBytes) }

// claimWithin is claim within the bounds of states and bytes given.
func (s *Store) claimWithin(need room, states, bytes int64) bool {
	if need.states > 0 && !take(&s.n, need.states, states) {
		return false
	}
	if need.bytes > 0 && !take(&s.bytes, need.bytes, bytes) {
		s.n.Add(-need.states)
		return false
	}
	return true
}

// debitBound returns how far debits may take the store beyond bound: an
// eighth more, at least one. A debit records work done, so a full store
// still counts it. A check that had room may be followed by its debit
// after other keys took the room. The margin stays bounded. So debits of
// new keys never grow the store without end.
func debitBound(bound int64) int64 { return bound + max(1, bound/8) }

func take(c *atomic.Int64, n, bound int64) bool {
	for {
		v := c.Load()
		if v+n > bound {
			return false
		}
		if c.CompareAndSwap(v, v+n) {
			return true
		}
	}
}

// trueUp gives back what a committed decision claimed and did not use:
// need.bytes is an upper bound of grown.
func (s *Store) trueUp(need room, grown int64) {
	if grown != need.bytes {
		s.bytes.Add(grown - need.bytes)
	}
}

// fits reports whether the store has room for need now, as claim would
// find it: a need of nothing fits a store that debits took beyond a bound.
func (s *Store) fits(need room) bool {
	return (need.states <= 0 || s.n.Load()+need.states <= s.max) && (need.bytes <= 0 || s.bytes.Load()+need.bytes <= s.maxBytes)
}

// refuse turns res, an allowed check of e (nil: no state), into the denial
// of a request the store has no room for. It can be retried when the
// soonest sampled state becomes idle (at least a millisecond from now),
// never if its need alone exceeds a bound.
func (s *Store) refuse(res *redlimit.Result, e *entry, now int64, need room, soonest int64) {
	retry := time.Millisecond
	switch {
	case need.states > s.max || need.bytes > s.maxBytes:
		retry = redlimit.Never
	case soonest > now:
		retry = max(retry, us(soonest-now))
	}
	var reset time.Duration
	if e != nil && e.expires > now {
		reset = us(e.expires - now)
	}
	*res = redlimit.Result{Max: res.Max, RetryAfter: retry, ResetAfter: reset}
}

// evict makes room for need: it samples up to sampleRounds times
// sampleSize slots at random and removes their idle states, until the
// store has room. The caller must hold no slot's lock; evict only tries
// slots' locks, skipping those held. It returns the soonest instant (µs)
// at which a sampled state that is not idle becomes idle, or 0.
func (s *Store) evict(now int64, need room) (soonest int64) {
	if need.states > s.max || need.bytes > s.maxBytes {
		return 0 // no eviction makes room for it
	}
	var picked [sampleSize]*slot
	for range sampleRounds {
		if s.fits(need) {
			return soonest
		}
		for _, sl := range picked[:s.sample.pick(picked[:])] {
			if !sl.mu.TryLock() {
				continue // being decided
			}
			for e := sl.head; e != nil; {
				next := e.next
				if idle(e, now) {
					s.drop(sl, e)
				} else if soonest == 0 || e.expires < soonest {
					soonest = e.expires
				}
				e = next
			}
			sl.mu.Unlock()
		}
	}
	return soonest
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

// Sweep removes every idle state and expired lease now. The background
// sweeper calls it; callers rarely need to.
func (s *Store) Sweep() {
	s.leases.mu.Lock()
	s.trimAllLeases(s.micros())
	s.leases.mu.Unlock()
	s.keys.Range(func(_, v any) bool {
		sl := v.(*slot)
		sl.mu.Lock()
		now := s.micros()
		for e := sl.head; e != nil; {
			next := e.next
			if idle(e, now) {
				s.drop(sl, e)
			}
			e = next
		}
		s.unlock(sl)
		return true
	})
}

// sampler holds the slots that hold states in arrays. So eviction can pick
// slots at random in bounded time. A sync.Map's Range always starts at the
// same place. There idle states would be found only among the same few
// keys. The sampler is sharded, so new keys made at once on several cores
// rarely wait for each other.
type sampler struct {
	shards [sampleShards]sampleShard
}

type sampleShard struct {
	mu    sync.Mutex
	slots []*slot
	_     [32]byte // one cache line each
}

// add adds sl, whose lock is held.
func (sm *sampler) add(sl *slot) {
	sh := &sm.shards[sl.shard]
	sh.mu.Lock()
	sl.pos = len(sh.slots)
	sh.slots = append(sh.slots, sl)
	sh.mu.Unlock()
}

// remove removes sl, whose lock is held.
func (sm *sampler) remove(sl *slot) {
	sh := &sm.shards[sl.shard]
	sh.mu.Lock()
	last := len(sh.slots) - 1
	moved := sh.slots[last]
	sh.slots[sl.pos], moved.pos = moved, sl.pos
	sh.slots[last] = nil
	sh.slots = sh.slots[:last]
	if c := cap(sh.slots); c > 1024 && last < c/4 {
		// After a flood: give the array back.
		sh.slots = append(make([]*slot, 0, 2*last), sh.slots...)
	}
	sh.mu.Unlock()
}

// pick fills out with slots drawn at random, each from a shard drawn at
// random. If that shard is empty, it takes the next non-empty one. It
// returns how many it drew: 0 if the store holds no state. Eviction
// drains the shards it samples. Drawing a round's slots from one shard
// would keep sampling shards whose idle states are gone. The slots may be
// removed from the store as soon as pick returns.
func (sm *sampler) pick(out []*slot) int {
	for j := range out {
		first := rand.IntN(sampleShards)
		for i := range sampleShards {
			sh := &sm.shards[(first+i)%sampleShards]
			sh.mu.Lock()
			if n := len(sh.slots); n > 0 {
				out[j] = sh.slots[rand.IntN(n)]
				sh.mu.Unlock()
				break
			}
			sh.mu.Unlock()
			if i == sampleShards-1 {
				return j // every shard is empty
			}
		}
	}
	return len(out)
}
