package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Queuer = (*Store)(nil)

// checkQueue is checkGCRA for a request that may wait up to wait µs. One
// that does not conform now takes the first instant it does. Its TAT
// moves on beyond the tolerance, but not past maxTAT. It returns the wait
// too (lua/queue.lua).
func checkQueue(e *entry, p *params, now, n, wait int64, r *redlimit.Result) (update, int64) {
	w := check(e, p, now, n, r)
	if r.Allowed || r.RetryAfter == redlimit.Never || r.RetryAfter > us(wait) {
		return w, 0
	}
	over := r.RetryAfter.Microseconds()
	if over+p.tau > maxTAT-now {
		return w, 0 // denied: a Lua number would round the TAT
	}
	due := over + p.tau
	*r = redlimit.Result{Allowed: true, Max: p.burst, ResetAfter: us(due)}
	return update{expires: now + due}, over
}

// queued is a request being queued: its maximum wait, then its wait and
// the arrival time it writes, µs.
type queued struct{ wait, delay, tat int64 }

// decide is check, or checkQueue when q is not nil.
func decide(e *entry, p *params, now, n int64, r *redlimit.Result, q *queued) update {
	if q == nil {
		return check(e, p, now, n, r)
	}
	w, over := checkQueue(e, p, now, n, q.wait, r)
	q.delay, q.tat = over, w.expires
	return w
}

// Queue implements [redlimit.Queuer].
func (s *Store) Queue(ctx context.Context, key string, limit redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	if err := redlimit.ValidateQueue(key, limit, n, maxWait); err != nil {
		return redlimit.Turn{}, fmt.Errorf("memory: %w", err)
	}
	r := redlimit.Turn{Key: key, Limit: limit, Cost: n}
	q := queued{wait: maxWait.Microseconds()}
	if err := s.allowSlow(ctx, key, limit, n, &r.Result, &q); err != nil {
		return redlimit.Turn{}, err
	}
	if r.Allowed {
		r.Delay, r.TAT = us(q.delay), q.tat
	}
	return r, nil
}

// Unqueue implements [redlimit.Queuer].
func (s *Store) Unqueue(ctx context.Context, r redlimit.Turn) (bool, error) {
	if err := redlimit.ValidateQueue(r.Key, r.Limit, r.Cost, 0); err != nil {
		return false, fmt.Errorf("memory: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	v, ok := s.keys.Load(r.Key)
	if !ok {
		return false, nil
	}
	sl := v.(*slot)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	e := sl.find(r.Limit.Algorithm, r.Limit.Period, r.Limit.Calendar)
	now := s.micros()
	if e == nil || now >= e.expires || e.bucket.tat != r.TAT {
		return false, nil
	}
	e.bucket.tat -= r.Cost * r.Limit.EmissionInterval()
	e.expires = e.bucket.tat
	return true, nil
}
