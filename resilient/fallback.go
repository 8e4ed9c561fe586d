package resilient

import (
	"cmp"
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// FallbackOptions configure the local fallback, which decides the limits
// whose policy is [redlimit.FailLocal] while the store fails, and the
// rejoining after an outage. The zero value of each field is its default.
type FallbackOptions struct {
	// Limiter decides in process, without the caller's deadline and
	// cancellation. Default: a memory store the Limiter owns.
	Limiter redlimit.Limiter
	// LastSeenSize bounds how many states (key, algorithm, period) the
	// Limiter remembers the store's last answer for (default
	// [DefaultLastSeenSize]). An entry also keeps its key;
	// docs/BENCHMARKS.md has its cost. The fallback starts from that
	// answer rather than from a full share.
	// Negative: off.
	LastSeenSize int
	// LastSeenBytes bounds the bytes of those answers (default
	// [DefaultCacheBytes]), as [DenyCacheOptions.Bytes] does the deny
	// cache's.
	LastSeenBytes int
	// Rejoin is how long after an outage this node holds a decision to
	// its local share as well (default [DefaultRejoin]; negative: off).
	// It applies to decisions whose limits all fail local and carry no
	// debit. It counts from the later of the outage's last store failure
	// and the breaker's close. After the close, a failure is the outage's
	// while one decision in 16 or more of the recent ones met one.
	//
	// The nodes come back apart: on Redis Cluster, up to seconds after a
	// failover. The store learns what another node admitted by itself only
	// when that node is back. So while it rejoins, a node admits no more
	// than its share, as during the outage. The share answers a decision
	// it denies ([redlimit.FromLocal]); the store answers the others.
	// Decisions through Admit (package reserve) are not held.
	Rejoin time.Duration
}

// fallback is the local fallback: this node's shares of the limits in an
// in-process Limiter, started from the store's last answers, and the
// rejoining after an outage.
type fallback struct {
	lim   redlimit.Limiter
	owned *memory.Store // lim, when the Limiter made it
	seen  *lastSeen     // nil when off
	nodes NodeCounter
	mono  mono

	rejoin    time.Duration // 0 when off
	outage    atomic.Bool   // the breaker opened since it last closed
	until     atomic.Int64  // the end of the rejoin, in mono's nanoseconds
	failShare atomic.Uint32 // the share of recent decisions that met a store failure, while rejoining (see noteDecision)
}

func newFallback(o FallbackOptions, nodes NodeCounter, m mono) (*fallback, error) {
	f := &fallback{lim: o.Limiter, nodes: nodes, mono: m, rejoin: max(0, cmp.Or(o.Rejoin, DefaultRejoin))}
	// No rejoin until an outage: the zero value would be the epoch
	// itself, which a clock without a monotonic reading (Options.Now) may
	// read earlier than, stepped back.
	f.until.Store(math.MinInt64)
	if o.LastSeenSize >= 0 {
		f.seen = newLastSeen(cmp.Or(o.LastSeenSize, DefaultLastSeenSize), cmp.Or(o.LastSeenBytes, DefaultCacheBytes), m)
	}
	if f.lim == nil {
		fb, err := memory.New()
		if err != nil {
			return nil, err
		}
		f.lim, f.owned = fb, fb
	}
	return f, nil
}

// close closes the fallback store the Limiter made, if any.
func (f *fallback) close() error {
	if f.owned == nil {
		return nil
	}
	return f.owned.Close()
}

// breakerOpened starts an outage.
func (f *fallback) breakerOpened() {
	f.outage.Store(true)
	f.failShare.Store(failOne) // failing until decisions since say otherwise
}

// breakerClosed ends the outage at now, if one began: the rejoin starts.
func (f *fallback) breakerClosed(now time.Time) {
	if f.outage.Swap(false) && f.rejoin > 0 {
		f.rejoinFrom(now)
	}
}

// storeFailed records a store failure (or the open breaker's refusal) at
// now. A failure of the outage moves the rejoin's end to Rejoin from
// now: on Redis Cluster the breaker may close on another master's keys
// while the failing master's still fail. A failure is the outage's while
// the breaker is not closed, and, while rejoining, if failures are still
// frequent: at least one in failExtends of the recent decisions. The odd
// failure of a store that is back does not make the rejoin last, nor
// does a failure outside an outage start one.
func (f *fallback) storeFailed(now time.Time, breakerClosed bool) {
	if f.rejoin == 0 {
		return
	}
	if !breakerClosed {
		f.rejoinFrom(now)
		return
	}
	if f.rejoining(now) && f.noteDecision(true) >= failOne/failExtends {
		f.rejoinFrom(now)
	}
}

// rejoining reports whether the Limiter rejoins at t. Until its first
// outage's rejoin, it reads no clock but t's.
func (f *fallback) rejoining(t time.Time) bool {
	until := f.until.Load()
	return until != math.MinInt64 && f.mono.ns(t) < until
}

// everRejoined reports whether a rejoin has begun: before that, no clock
// need be read to tell.
func (f *fallback) everRejoined() bool { return f.until.Load() != math.MinInt64 }

// The share of failures is an exponentially weighted average over about
// failWeight decisions, in units of 1/failOne. It counts decisions, not
// store calls: while rejoining, the shares answer most decisions without a
// call, and the odd failure must stay a small share of them. It is set to
// failOne (all failing) when the breaker opens, so a master still down
// after the breaker closed extends the rejoin from its first failure.
const (
	failOne     = 1 << 16
	failWeight  = 32
	failExtends = 16 // a failure extends the rejoin at a share of 1/16 or more
)

// noteDecision adds a decision to the share of failures, as failed if it
// met a store failure, and returns the share.
func (f *fallback) noteDecision(failed bool) uint32 {
	for {
		old := f.failShare.Load()
		share := old - old/failWeight
		if failed {
			share += failOne / failWeight
		}
		if f.failShare.CompareAndSwap(old, share) {
			return share
		}
	}
}

// rejoinFrom makes the rejoin last at least until Rejoin after now, or
// for ever for a Rejoin that would pass the largest instant mono measures.
// Its end only moves later: of two failures recorded at once, the one that
// read the clock first may store last.
func (f *fallback) rejoinFrom(now time.Time) {
	end := int64(math.MaxInt64)
	if n := f.mono.ns(now); n <= 0 || int64(f.rejoin) <= math.MaxInt64-n {
		end = n + int64(f.rejoin) // no overflow: n <= 0 (a clock behind the start), or room left
	}
	for {
		cur := f.until.Load()
		if end <= cur || f.until.CompareAndSwap(cur, end) {
			return
		}
	}
}

// fromShares runs while rejoining, when other nodes share the limits. If
// reqs all fail local and carry no debit, it takes them from this node's
// shares. It returns the shares' decision; ok false: the store decides
// alone.
// The store decides what the shares admit. What they admitted stays taken,
// so that this node stays within its share until the rejoin ends.
func (f *fallback) fromShares(ctx context.Context, reqs []redlimit.Request, now time.Time) (d redlimit.Decision, ok bool) {
	if f.nodes.Nodes() <= 1 {
		return d, false // no other node's admissions for the store to miss
	}
	for _, r := range reqs {
		if r.Limit.Failure != redlimit.FailLocal || r.Debit {
			return d, false
		}
	}
	ctx = policyContext(ctx)
	local := make([]redlimit.Request, len(reqs))
	for i, r := range reqs {
		local[i] = f.onShare(ctx, r, now)
	}
	d, err := f.lim.AllowAll(ctx, local)
	if err != nil {
		return d, false
	}
	for i := range d.Results {
		d.Results[i].Source = redlimit.FromLocal
	}
	return d, true
}

// onShare returns r as the fallback decides it: under this node's share
// of its limit, the local state brought down to what the store last said.
func (f *fallback) onShare(ctx context.Context, r redlimit.Request, now time.Time) redlimit.Request {
	share := f.share(r.Limit)
	f.startFrom(ctx, r.Key, r.Limit, share, now)
	r.Limit = share
	return r
}

// startFrom brings the local state of key under share, this node's share
// of limit, down to what the store last said (see lastSeen).
func (f *fallback) startFrom(ctx context.Context, key string, limit, share redlimit.Limit, now time.Time) {
	if f.seen != nil {
		f.seen.startFrom(ctx, f.lim, key, limit, share, int64(max(1, f.nodes.Nodes())), now)
	}
}

// peek is Peek of key on this node's share of limit.
func (f *fallback) peek(ctx context.Context, key string, limit redlimit.Limit, n int64, now time.Time) (redlimit.Result, error) {
	share := f.share(limit)
	f.startFrom(ctx, key, limit, share, now)
	r, err := f.lim.Peek(ctx, key, share, n)
	r.Source = redlimit.FromLocal
	return r, err
}

// reset resets key in the fallback and forgets the store's last answer.
func (f *fallback) reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if f.seen != nil {
		f.seen.forget(key, limit)
	}
	return f.lim.Reset(ctx, key, f.share(limit))
}

// share returns this node's share of lim: Count and Burst divided by the
// live nodes, rounded up.
func (f *fallback) share(lim redlimit.Limit) redlimit.Limit {
	n := int64(max(1, f.nodes.Nodes()))
	lim.Count = ceilDiv(lim.Count, n)
	if lim.Algorithm == redlimit.TokenBucket {
		lim.Burst = ceilDiv(lim.Burst, n)
	}
	return lim
}

// ceilDiv returns a / b rounded up, for a >= 0 and b >= 1, without the
// overflow of (a + b - 1) / b for a b near the int64's bound.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
