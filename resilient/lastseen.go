package resilient

import (
	"context"
	"time"

	"github.com/redlimit/redlimit"
)

// lastSeen remembers, per state, what the store last answered this node.
// When a limit falls back to the local limiter, the local state starts
// from it rather than from a full share. A key that had 4 left of 100
// gets a local allowance of ceil(4 / live nodes). A key that had nothing
// left stays exhausted. Keys the node has not seen (or has forgotten) get
// the whole share.
//
// An entry keeps its key string. TestLastSeenMemory measures its cost
// (docs/BENCHMARKS.md).
type lastSeen struct {
	*boundedMap[seen]
	mono mono
}

// seen is what the store answered for a state. Times are nanoseconds of
// the Limiter's mono.
type seen struct {
	at        int64 // when the call was sent
	drained   int64 // from when the state is full again: at + ResetAfter
	max       int64 // the limit's Max when answered
	remaining int64
	applied   bool // the local state has been brought down to this answer
}

func newLastSeen(size, maxBytes int, m mono) *lastSeen {
	return &lastSeen{newBoundedMap(size, maxBytes, func(s *seen, now time.Time) bool { return m.ns(now) >= s.drained }), m}
}

// put remembers r, the store's answer for key and l to a call sent at start.
func (ls *lastSeen) put(key string, l redlimit.Limit, start time.Time, r redlimit.Result) {
	if r.Source != redlimit.FromStore {
		return
	}
	at := ls.mono.ns(start)
	s := seen{at: at, drained: at + int64(r.ResetAfter), max: r.Max, remaining: r.Remaining}
	sh := ls.shard(key)
	k := l.StateID(key)
	sh.mu.Lock()
	if old, ok := sh.m[k]; !ok || old.at <= at {
		ls.insert(sh, k, s, start)
	}
	sh.mu.Unlock()
}

// startFrom brings the local state of key down to what the store last
// said, once per answer of the store. share is this node's share of limit
// l. The state goes down to at most ceil(remaining / nodes). remaining is
// the store's last Remaining, counted against l's Max if the answer was
// for another Count. It applies as long as that state would not have
// drained since. fb is the local fallback. Errors of fb leave the local
// state as it is.
//
// The consumption that brings the local state down is made now, so it
// drains up to a period later than the store's state would have: the
// local state errs on the strict side.
func (ls *lastSeen) startFrom(ctx context.Context, fb redlimit.Limiter, key string, l, share redlimit.Limit, nodes int64, now time.Time) {
	sh := ls.shard(key)
	k := l.StateID(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.m[k]
	if !ok || s.applied {
		return
	}
	s.applied = true
	sh.m[k] = s
	if ls.mono.ns(now) >= s.drained {
		return
	}
	left := max(0, l.Max()-(s.max-s.remaining))
	target := ceilDiv(left, nodes)
	// A few tries: concurrent local decisions of the key may consume
	// between the look and the take.
	for range 3 {
		p, err := fb.Peek(ctx, key, share, 1)
		if err != nil {
			return
		}
		have := p.Remaining
		if p.Allowed {
			have++
		}
		if have <= target {
			return
		}
		if r, err := fb.AllowN(ctx, key, share, have-target); err != nil || r.Allowed {
			return
		}
	}
}

// fullAt returns when the store last said the state of key and l would be
// full again (drained), if it said so.
func (ls *lastSeen) fullAt(key string, l redlimit.Limit) (int64, bool) {
	sh := ls.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.m[l.StateID(key)]
	return s.drained, ok
}
