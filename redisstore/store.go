package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/kept"
	"github.com/redlimit/redlimit/internal/micros"
)

// DefaultPrefix starts every key the store writes, unless [WithPrefix] says otherwise.
const DefaultPrefix = "redlimit:"

// Store is a [redlimit.Limiter] on Redis. Every decision is one run of one
// Lua script, so concurrent callers on any number of servers never
// interleave. It is safe for concurrent use. The caller owns the client
// and closes it, after [Store.Close]. Close waits for the refunds still
// running on Cluster (see [Store.AllowAll]). It ends the few goroutines
// the Store keeps to send batches (see [WithBatching]). The Store holds no
// other resources.
type Store struct {
	b             backend
	prefix        string
	now           func() time.Time // nil: the Redis server's clock
	hostNow       func() time.Time // the clock of calendar arithmetic: now, or this host's
	margin        string           // µs added to every TTL, ARGV[3]
	close         func()           // closes a client the Store opened itself
	onRefundError func(ctx context.Context, reqs []redlimit.Request, err error)
	bg            sync.WaitGroup       // refunds still running after AllowAll returned
	noBatching    bool                 // WithBatching(false)
	noNodeBatches bool                 // WithNodeBatches(false)
	batches       *batchers            // route.go; set up by newStore
	runners       *kept.Pool[batchRun] // batch.go: the goroutines that send batches

	batchScriptAlways bool // tests: every decision a batch of one, past the batcher (on Cluster, to its node)
}

// pingRequest is what Ping peeks at.
var pingRequest = redlimit.Request{Key: "ping", Limit: redlimit.PerSecond(1).FixedWindow(), Cost: 1}

var _ redlimit.Limiter = (*Store)(nil)

// Option configures a Store.
type Option func(*Store) error

// WithPrefix sets the text every key starts with (default [DefaultPrefix]).
// It may not hold '{' or '}', which would change the key's hash tag.
func WithPrefix(prefix string) Option {
	return func(s *Store) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("redisstore: prefix %q holds a brace", prefix)
		}
		s.prefix = prefix
		return nil
	}
}

// WithClock makes the store pass the time from now to every script instead
// of letting Redis read its own clock (TIME). Only tests and callers who
// must decide at a chosen instant want this: with it, servers whose clocks
// disagree no longer share one timeline. Redis still expires keys on its own
// clock, with TTLs computed from the times passed, so those times must not
// advance more slowly than real time.
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		if now == nil {
			return fmt.Errorf("redisstore: WithClock(nil)")
		}
		s.now = now
		return nil
	}
}

// WithTTLMargin lengthens every key's TTL by d (default 0). TTLs only bound
// how long idle state costs memory. Expired state is recognised from the
// stored times, whatever the TTL. Servers may pass their own time with
// [WithClock]. Then give a margin as large as the clock skew between them.
// So a key is not dropped while a server whose clock is behind still
// needs it.
func WithTTLMargin(d time.Duration) Option {
	return func(s *Store) error {
		if d < 0 || d > redlimit.MaxPeriod {
			return fmt.Errorf("redisstore: TTL margin %s is not in 0..%s", d, redlimit.MaxPeriod)
		}
		s.margin = strconv.FormatInt(d.Microseconds(), 10)
		return nil
	}
}

// New returns a Store that runs its scripts through a rueidis client
// (standalone, Sentinel or Cluster; concurrent calls are auto-pipelined).
func New(client rueidis.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client")
	}
	return newStore(newRueidisBackend(client), opts)
}

// NewGoRedis returns a Store that runs its scripts through a go-redis client
// the caller already has: a *redis.Client (standalone or failover), a
// *redis.ClusterClient or a *redis.Ring.
//
// go-redis sends a command again when its connection broke after it was
// written: MaxRetries on a *redis.Client (3 by default), MaxRedirects on a
// *redis.ClusterClient. A script that ran may then run twice. A decision
// counts twice, on the strict side. A refund after a denial on Cluster
// (see [Store.AllowAll]) gives back twice. MaxRetries: -1 on a
// *redis.Client avoids it. The rueidis client ([New]) never resends a
// script that may have run.
func NewGoRedis(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client")
	}
	return newStore(newGoRedisBackend(client), opts)
}

func newStore(b backend, opts []Option) (*Store, error) {
	s := &Store{b: b, prefix: DefaultPrefix, margin: "0", onRefundError: logRefundError}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if s.hostNow == nil {
		s.hostNow = time.Now
		if s.now != nil {
			s.hostNow = s.now
		}
	}
	s.batches = newBatchers(s)
	s.runners = kept.New(maxRunners, batchRun.run)
	return s, nil
}

// Allow is AllowN with a cost of 1.
func (s *Store) Allow(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	return s.AllowN(ctx, key, limit, 1)
}

// AllowN implements [redlimit.Limiter] in one script call.
func (s *Store) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	return s.decideOne(ctx, opAllow, key, limit, n)
}

// Peek implements [redlimit.Limiter] in one script call that writes nothing.
func (s *Store) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	return s.decideOne(ctx, opPeek, key, limit, n)
}

// Reset implements [redlimit.Limiter]: it deletes the limit's keys.
func (s *Store) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	reqs := []redlimit.Request{{Key: key, Limit: limit, Cost: 1}}
	w := s.newWire()
	w.several(kindReset, s.keys(reqs), reqs)
	r, err := s.call(ctx, "reset", &w)
	if err == nil && !r.ok() {
		err = badReply("reset", r)
	}
	return err
}

// decideOne validates one request and decides it with op (opAllow or
// opPeek), in a batch unless batching is off (see [WithBatching]).
func (s *Store) decideOne(ctx context.Context, op, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("redisstore: %w", err)
	}
	p := s.newEntryOne(ctx, op, redlimit.Request{Key: key, Limit: limit, Cost: n})
	o := s.decideEntry(p)
	return o.res, o.err
}

// decideEntry decides p: in a batch unless batching is off (see
// [WithBatching]), or through the batch script alone (a test hook).
func (s *Store) decideEntry(p *entry) entryReply {
	if s.batchScriptAlways {
		s.sendBatch(p.ctx, []*entry{p}, s.scriptTime(), s.batches.nodeOf(p.ctx, p.slot))
		return p.out
	}
	if b := s.batches.of(p.slot); b != nil {
		return b.decide(p)
	}
	return s.decideAlone(p.ctx, p, s.scriptTime())
}

// AllowAll implements [redlimit.Limiter].
//
// On a standalone server, or on Redis Cluster when every key has the same
// hash tag (the same identifier), every limit is decided atomically in one
// script call.
//
// On Cluster with several identifiers, the requests are grouped by
// identifier. The groups are decided concurrently, each atomically. If a
// group denies, the request is denied, with a nil error, whatever the
// other groups did. The limits of a group whose call failed are
// [redlimit.Undecided]. So are those of a group that had not answered when
// AllowAll returned (see below). If no group denies and one fails, its
// error is returned. Unless every group allowed, what the groups that
// allowed consumed is refunded. A refund that Redis refused, or that could
// not reach its node, is made again: up to 4 attempts within 1 s, with
// backoff. One not known to have run is not: it may have been applied.
// That is a timeout, or a connection lost after it was sent. A refund
// that failed for good goes to the handler set with
// [WithRefundErrorHandler]. The limits it was for keep the cost until
// their windows pass, on the strict side. So does a group whose call
// failed after its script ran: its error cannot tell whether it ran.
//
// No limit ever admits above its count this way. But another request may
// come between the consumption and the refund, one round trip. It may see
// the refunded cost as used and be denied: the error is on the strict
// side.
//
// Once a group has denied, AllowAll waits for the other groups and the
// refunds only until halfway from then to ctx's deadline. So a caller with
// a deadline gets the denial before it, even when a node hangs. What still
// runs then carries on in the background, within 1 s. [Store.Close]
// waits for it. Without a deadline, AllowAll returns when everything has
// answered.
func (s *Store) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("redisstore: %w", err)
	}
	groups := s.groups(reqs)
	if len(groups) > 1 {
		return s.allowSharded(ctx, reqs, groups)
	}
	d := redlimit.Decision{Results: make([]redlimit.Result, len(reqs))}
	allowed, _, err := s.decideGroup(ctx, reqs, d.Results)
	d.Allowed = allowed
	return d, err
}

// groups returns the indexes of reqs that must go to the same script call:
// all of them unless the backend is sharded.
func (s *Store) groups(reqs []redlimit.Request) [][]int {
	all := make([]int, len(reqs))
	for i := range all {
		all[i] = i
	}
	if !s.b.sharded() {
		return [][]int{all}
	}
	var gs [][]int
	tags := make(map[string]int, len(reqs))
	for i, r := range reqs {
		t := hashTag(r.Key)
		g, ok := tags[t]
		if !ok {
			g = len(gs)
			tags[t] = g
			gs = append(gs, nil)
		}
		gs[g] = append(gs[g], i)
	}
	return gs
}

// The operations of decisions of one limit, and the names of calls in
// errors.
const (
	opAllow = "allow"
	opPeek  = "peek"
)

// decideGroup decides reqs, of one hash tag, as one entry (a batch's, or
// a batch of one), and fills results. It returns whether every request
// was allowed, and the time (µs) the script decided at, from which a
// refund of the group finds what the allows wrote.
func (s *Store) decideGroup(ctx context.Context, reqs []redlimit.Request, results []redlimit.Result) (allowed bool, at int64, err error) {
	o := s.decideEntry(s.newEntry(ctx, opAllow, reqs))
	if o.err != nil {
		return false, 0, o.err
	}
	if o.results == nil {
		results[0] = o.res
		return o.res.Allowed, o.at, nil
	}
	allowed = true
	for i, r := range o.results {
		results[i] = r
		allowed = allowed && r.Allowed
	}
	return allowed, o.at, nil
}

// keys returns the Redis keys of reqs.
func (s *Store) keys(reqs []redlimit.Request) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = s.key(hashTag(r.Key), r.Limit)
	}
	return keys
}

// call runs w, which holds one entry (a call never batched). It returns
// the reply, at the entry's values. The error is the call's, or the
// entry's own (ErrKeyState), named op.
func (s *Store) call(ctx context.Context, op string, w *wire) (*reply, error) {
	keys, args := w.args(s.scriptTime(), s.margin, false)
	v, err := s.b.eval(ctx, batchScript, keys, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	r, ok := readReply(v)
	if !ok {
		return nil, fmt.Errorf("redisstore: %s: %w: %d values", op, redlimit.ErrBadReply, len(v))
	}
	if f := r.next(); f != 0 {
		return nil, entryError(op, f)
	}
	return &r, nil
}

// badReply is the error of a reply of the wrong shape for op.
func badReply(op string, r *reply) error {
	return fmt.Errorf("redisstore: %s: %w: for entry %d", op, redlimit.ErrBadReply, r.entry)
}

func fromMicros(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// newWire returns an empty call, whose calendar windows are those of the
// store's clock, or of this host's for the server's.
func (s *Store) newWire() wire {
	return wire{now: micros.Of(s.hostNow())}
}

// scriptTime returns ARGV[2] of the scripts: the store's clock in µs with
// WithClock, or "" for the Redis server's.
func (s *Store) scriptTime() string {
	if s.now == nil {
		return ""
	}
	return strconv.FormatInt(micros.Of(s.now()), 10)
}
