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
)

// DefaultPrefix starts every key the store writes, unless [WithPrefix] says otherwise.
const DefaultPrefix = "redlimit:"

// Store is a [redlimit.Limiter] on Redis: every decision is one run of one
// Lua script, so concurrent callers on any number of servers never
// interleave. It is safe for concurrent use. The caller owns the client and
// closes it; the Store holds no other resources.
type Store struct {
	b      backend
	prefix string
	now    func() time.Time // nil: the Redis server's clock
	margin string           // µs added to every TTL, ARGV[3]
	close  func()           // closes a client the Store opened itself
}

// pingRequest is what Ping peeks at.
var pingRequest = []redlimit.Request{{Key: "ping", Limit: redlimit.PerSecond(1).FixedWindow(), Cost: 1}}

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
// how long idle state costs memory: expired state is recognised from the
// stored times, whatever the TTL. Give a margin as large as the clock skew
// between the servers when they pass their own time with [WithClock], so a
// key is not dropped while a server whose clock is behind still needs it.
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
func NewGoRedis(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client")
	}
	return newStore(newGoRedisBackend(client), opts)
}

func newStore(b backend, opts []Option) (*Store, error) {
	s := &Store{b: b, prefix: DefaultPrefix, margin: "0"}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Allow is AllowN with a cost of 1.
func (s *Store) Allow(ctx context.Context, key string, limit redlimit.Limit) (redlimit.Result, error) {
	return s.AllowN(ctx, key, limit, 1)
}

// AllowN implements [redlimit.Limiter] in one script call.
func (s *Store) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	return s.one(ctx, opAllow, key, limit, n)
}

// Peek implements [redlimit.Limiter] in one script call that writes nothing.
func (s *Store) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	return s.one(ctx, opPeek, key, limit, n)
}

// Reset implements [redlimit.Limiter]: it deletes the limit's keys.
func (s *Store) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	_, err := s.run(ctx, opReset, []redlimit.Request{{Key: key, Limit: limit, Cost: 1}}, "")
	return err
}

func (s *Store) one(ctx context.Context, op, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("redisstore: %w", err)
	}
	reqs := [1]redlimit.Request{{Key: key, Limit: limit, Cost: n}}
	var res [1]redlimit.Result
	if _, err := s.decide(ctx, op, reqs[:], res[:], ""); err != nil {
		return redlimit.Result{}, err
	}
	return res[0], nil
}

// AllowAll implements [redlimit.Limiter].
//
// On a standalone server, or on Redis Cluster when every key has the same
// hash tag (the same identifier), every limit is decided atomically in one
// script call. On Cluster with several identifiers, the requests are grouped
// by identifier and the groups decided concurrently, each atomically; if any
// group denies, what the others consumed is refunded. No limit ever admits
// above its count this way, but between the consumption and the refund
// (one round trip) another request may see the refunded cost as used and be
// denied: the error is on the strict side.
func (s *Store) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("redisstore: %w", err)
	}
	d := redlimit.Decision{Results: make([]redlimit.Result, len(reqs))}
	groups := s.groups(reqs)
	if len(groups) == 1 {
		allowed, err := s.decide(ctx, opAllow, reqs, d.Results, "")
		d.Allowed = allowed
		return d, err
	}
	return s.allowSharded(ctx, reqs, groups, d)
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

func (s *Store) allowSharded(ctx context.Context, reqs []redlimit.Request, groups [][]int, d redlimit.Decision) (redlimit.Decision, error) {
	type outcome struct {
		reqs    []redlimit.Request
		results []redlimit.Result
		allowed bool
		now     int64
		err     error
	}
	outs := make([]outcome, len(groups))
	var wg sync.WaitGroup
	for g, idx := range groups {
		o := &outs[g]
		for _, i := range idx {
			o.reqs = append(o.reqs, reqs[i])
		}
		o.results = make([]redlimit.Result, len(idx))
		wg.Go(func() {
			o.allowed, o.now, o.err = s.decideAt(ctx, opAllow, o.reqs, o.results, "")
		})
	}
	wg.Wait()

	d.Allowed = true
	var firstErr error
	for g := range outs {
		d.Allowed = d.Allowed && outs[g].allowed
		if outs[g].err != nil && firstErr == nil {
			firstErr = outs[g].err
		}
	}
	if !d.Allowed {
		// Give back what the groups that allowed consumed. The refund runs
		// even if the caller's context is done, bounded by its own deadline.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
		defer cancel()
		for g := range outs {
			o := &outs[g]
			if o.err != nil || !o.allowed {
				continue
			}
			if _, err := s.run(rctx, opRefund, o.reqs, strconv.FormatInt(o.now, 10)); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("redisstore: refund after a denial: %w", err)
			}
		}
	}
	if firstErr != nil {
		return redlimit.Decision{}, firstErr
	}
	for g, idx := range groups {
		for j, i := range idx {
			d.Results[i] = outs[g].results[j]
		}
	}
	return d, nil
}

// refundTimeout bounds the refund of a sharded decision that was denied.
const refundTimeout = time.Second

// Script operations, ARGV[1].
const (
	opAllow  = "allow"
	opPeek   = "peek"
	opReset  = "reset"
	opRefund = "refund"
)

// decide runs op for reqs in one script call and fills results.
func (s *Store) decide(ctx context.Context, op string, reqs []redlimit.Request, results []redlimit.Result, at string) (bool, error) {
	allowed, _, err := s.decideAt(ctx, op, reqs, results, at)
	return allowed, err
}

func (s *Store) decideAt(ctx context.Context, op string, reqs []redlimit.Request, results []redlimit.Result, at string) (allowed bool, now int64, err error) {
	reply, err := s.run(ctx, op, reqs, at)
	if err != nil {
		return false, 0, err
	}
	if len(reply) != 1+4*len(reqs) {
		return false, 0, fmt.Errorf("redisstore: %w: %d values for %d limits", redlimit.ErrBadReply, len(reply), len(reqs))
	}
	allowed = true
	for i, r := range reqs {
		v := reply[1+4*i : 5+4*i]
		res := redlimit.Result{
			Allowed:    v[0] == 1,
			Limit:      r.Limit.Max(),
			Remaining:  v[1],
			RetryAfter: micros(v[2]),
			ResetAfter: micros(v[3]),
		}
		if v[2] < 0 {
			res.RetryAfter = redlimit.Never
		}
		results[i] = res
		allowed = allowed && res.Allowed
	}
	return allowed, reply[0], nil
}

func micros(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// run calls the script. at is the time in µs to decide at, or "" for the
// store's clock (the Redis server's unless WithClock was given). Allowing or
// peeking at one limit runs its algorithm's single-limit script, everything
// else the decision script; both reply in the same shape.
func (s *Store) run(ctx context.Context, op string, reqs []redlimit.Request, at string) ([]int64, error) {
	if at == "" && s.now != nil {
		at = strconv.FormatInt(s.now().UnixMicro(), 10)
	}
	if len(reqs) == 1 && (op == opAllow || op == opPeek) {
		return s.runSingle(ctx, op, reqs[0], at)
	}
	keys := make([]string, len(reqs))
	args := make([]string, 3, 3+6*len(reqs))
	args[0], args[1], args[2] = op, at, s.margin
	for i, r := range reqs {
		keys[i] = s.key(hashTag(r.Key), r.Limit)
		l := r.Limit
		var ei int64
		if l.Algorithm == redlimit.TokenBucket {
			ei = l.EmissionInterval()
		}
		args = append(args,
			strconv.Itoa(int(l.Algorithm)),
			strconv.FormatInt(l.Period.Microseconds(), 10),
			strconv.FormatInt(l.Count, 10),
			strconv.FormatInt(l.Burst, 10),
			strconv.FormatInt(ei, 10),
			strconv.FormatInt(r.Cost, 10),
		)
	}
	reply, err := s.b.eval(ctx, decideScript, keys, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return reply, nil
}

// runSingle calls the single-limit script of r's algorithm (see
// lua/single.lua for its arguments).
func (s *Store) runSingle(ctx context.Context, op string, r redlimit.Request, at string) ([]int64, error) {
	l := r.Limit
	window, count := l.Period.Microseconds(), l.Count
	if l.Algorithm == redlimit.TokenBucket {
		window, count = l.EmissionInterval(), l.Burst
	}
	keys := []string{s.key(hashTag(r.Key), l)}
	args := []string{
		op, at, s.margin,
		strconv.FormatInt(window, 10),
		strconv.FormatInt(count, 10),
		strconv.FormatInt(r.Cost, 10),
	}
	reply, err := s.b.eval(ctx, singleScript(l.Algorithm), keys, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return reply, nil
}
