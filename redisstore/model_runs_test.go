package redisstore_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// runTarget is a model target (see modelEnvs) that decides the AllowN and
// Peek calls a sequence makes one after another at one instant in one
// batch, as the store's batcher would had they come together: put
// together by key, in their order (sortRuns), so that the calls on one key
// are one run of the batch script (lua/batch.lua's run_log, run_windows,
// run_bucket). At each call the keys are put back as they were before the
// instant's first call (DUMP and RESTORE), and the calls so far decided
// again in one batch, whose answer for the last is the call's; the
// answers it gives the earlier calls must be the ones they got. So the
// model's sequences (limits changed under a state, debits, clocks that
// jump years, costs at the bounds) reach the coalesced runs, which the
// targets of one call per script never do. A batch ends at any other call,
// at another instant, or at 64 decisions (the batch cap); on Cluster
// (oneKey), where a batch is of one slot, at another key too.
type runTarget struct {
	s      *redisstore.Store
	client rueidis.Client
	clock  *redlimittest.Clock
	oneKey bool

	open  bool
	at    time.Time
	reqs  []redlimit.Request
	peek  []bool
	rks   []string
	got   []redlimit.Result
	snaps map[string]*snapshot // by Redis key, as before the batch's first call on it
}

// snapshot is a Redis key as DUMP gave it, with its TTL (0 for none), or
// nil when it did not exist.
type snapshot struct {
	value string
	ttl   int64
}

var _ redlimit.Limiter = (*runTarget)(nil)

func (r *runTarget) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	return r.decide(ctx, key, l, n, false)
}

func (r *runTarget) Peek(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	return r.decide(ctx, key, l, n, true)
}

func (r *runTarget) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	r.open = false
	return r.s.AllowAll(ctx, reqs)
}

func (r *runTarget) Reset(ctx context.Context, key string, l redlimit.Limit) error {
	r.open = false
	return r.s.Reset(ctx, key, l)
}

// Queue and Unqueue end the batch: the store makes each a call of its own.
func (r *runTarget) Queue(ctx context.Context, key string, l redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	r.open = false
	return r.s.Queue(ctx, key, l, n, maxWait)
}

func (r *runTarget) Unqueue(ctx context.Context, t redlimit.Turn) (bool, error) {
	r.open = false
	return r.s.Unqueue(ctx, t)
}

func (r *runTarget) decide(ctx context.Context, key string, l redlimit.Limit, n int64, peek bool) (redlimit.Result, error) {
	req := redlimit.Request{Key: key, Limit: l, Cost: n}
	if err := redlimit.ValidateRequests([]redlimit.Request{req}); err != nil {
		r.open = false
		if peek {
			return r.s.Peek(ctx, key, l, n) // its error
		}
		return r.s.AllowN(ctx, key, l, n)
	}
	rk, now := r.s.KeyOf(key, l), r.clock.Now()
	if !r.open || !now.Equal(r.at) || len(r.reqs) == 64 || r.oneKey && rk != r.rks[0] {
		r.open, r.at = true, now
		r.reqs, r.peek, r.rks, r.got = r.reqs[:0], r.peek[:0], r.rks[:0], r.got[:0]
		r.snaps = map[string]*snapshot{}
	}
	res, err := r.batch(ctx, req, rk, peek)
	if err != nil {
		r.open = false
	}
	return res, err
}

func (r *runTarget) batch(ctx context.Context, req redlimit.Request, rk string, peek bool) (redlimit.Result, error) {
	if _, ok := r.snaps[rk]; !ok {
		value, err := r.client.Do(ctx, r.client.B().Dump().Key(rk).Build()).ToString()
		switch {
		case rueidis.IsRedisNil(err):
			r.snaps[rk] = nil
		case err != nil:
			return redlimit.Result{}, err
		default:
			ttl, err := r.client.Do(ctx, r.client.B().Pttl().Key(rk).Build()).AsInt64()
			if err != nil {
				return redlimit.Result{}, err
			}
			r.snaps[rk] = &snapshot{value, max(ttl, 0)}
		}
	}
	for k, s := range r.snaps {
		cmd := r.client.B().Del().Key(k).Build()
		if s != nil {
			cmd = r.client.B().Restore().Key(k).Ttl(s.ttl).SerializedValue(s.value).Replace().Build()
		}
		if err := r.client.Do(ctx, cmd).Error(); err != nil {
			return redlimit.Result{}, err
		}
	}
	r.reqs, r.peek, r.rks = append(r.reqs, req), append(r.peek, peek), append(r.rks, rk)
	// The batcher's order: by key, in arrival order (sortRuns).
	order := make([]int, len(r.reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(r.rks[i], r.rks[j]) })
	reqs, peeks := make([]redlimit.Request, len(order)), make([]bool, len(order))
	for i, o := range order {
		reqs[i], peeks[i] = r.reqs[o], r.peek[o]
	}
	out, err := r.s.DecideBatch(ctx, reqs, peeks)
	if err != nil {
		return redlimit.Result{}, err
	}
	got := make([]redlimit.Result, len(out))
	for i, o := range order {
		got[o] = out[i]
	}
	for i, g := range r.got {
		if got[i] != g {
			return redlimit.Result{}, fmt.Errorf("a batch of %d: decision %d (%s) answered %+v, and %+v with the calls since", len(got), i, r.rks[i], g, got[i])
		}
	}
	r.got = append(r.got, got[len(got)-1])
	return got[len(got)-1], nil
}
