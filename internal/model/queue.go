package model

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Queuer = (*Model)(nil)

// Queue implements [redlimit.Queuer] from GCRA's definition. A request
// that conforms now is admitted. One that conforms within maxWait moves
// the arrival time n emission intervals on from where it is, as a debit
// does, if that is at most 2^53 µs. It waits until it conforms. Any
// other changes nothing.
func (m *Model) Queue(ctx context.Context, key string, limit redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	if err := redlimit.ValidateQueue(key, limit, n, maxWait); err != nil {
		return redlimit.Turn{}, err
	}
	return m.QueueAt(key, limit, n, maxWait, m.micros()), nil
}

// QueueAt is Queue at now (µs); the request must be valid.
func (m *Model) QueueAt(key string, limit redlimit.Limit, n int64, maxWait time.Duration, now int64) redlimit.Turn {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := redlimit.Turn{Key: key, Limit: limit, Cost: n}
	r := m.decide(key, limit, n, now)
	switch {
	case r.Allowed:
		m.commit(key, limit, n, now)
		t.Result = r
	case r.RetryAfter <= maxWait && m.queuedTAT(key, limit, n, now) <= 1<<53: // Never is above any maxWait
		st := m.get(key, limit)
		st.tat = max(st.tat, now) + n*limit.EmissionInterval()
		t.Result = redlimit.Result{Allowed: true, Max: limit.Max(), ResetAfter: us(st.tat - now)}
		t.Delay = r.RetryAfter
	default:
		t.Result = r
		return t
	}
	t.TAT = m.get(key, limit).tat
	return t
}

// queuedTAT returns the arrival time a request of cost n queued at now
// would write: n emission intervals on from where it is.
func (m *Model) queuedTAT(key string, limit redlimit.Limit, n, now int64) int64 {
	tat := now
	if st := m.get(key, limit); st != nil {
		tat = max(st.tat, now)
	}
	return tat + n*limit.EmissionInterval()
}

// Unqueue implements [redlimit.Queuer]: t's tokens go back while the
// arrival time is the one t wrote and still ahead of now.
func (m *Model) Unqueue(ctx context.Context, t redlimit.Turn) (bool, error) {
	if err := redlimit.ValidateQueue(t.Key, t.Limit, t.Cost, 0); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.get(t.Key, t.Limit)
	if st == nil || st.tat != t.TAT || st.tat <= m.micros() {
		return false, nil
	}
	st.tat -= t.Cost * t.Limit.EmissionInterval()
	return true, nil
}

// queue runs a Queue or Unqueue op on the targets, which must all be
// [redlimit.Queuer]s. It checks that they and the model agree. It checks
// that a queued turn stays within the bucket's bound at the instant it is
// admitted at. An op on a state where a Split target may differ is
// skipped.
func (r *runner) queue(op Op) *Failure {
	q := op.Reqs[0]
	desc := op.describe(r.env.Key)
	in := r.use(q)
	if in.split || in.refundAt != 0 || (op.Kind == Unqueue && in.turn == nil) {
		r.trace = append(r.trace, desc+": skipped")
		return nil
	}
	key := r.env.Key(q.Key)
	var turns []redlimit.Turn
	var backs []bool
	refused := false
	for _, tg := range r.env.Targets {
		qr, ok := tg.Limiter.(redlimit.Queuer)
		if !ok {
			// Its state would part from the others'.
			return r.fail("error", "%s: target %s cannot queue", desc, tg.Name)
		}
		var before uint64
		if tg.Refused != nil {
			before = tg.Refused()
		}
		var t redlimit.Turn
		var back bool
		var err error
		if op.Kind != Unqueue {
			t, err = qr.Queue(r.ctx, key, q.Limit, q.Cost, queueWait(op.Kind, q.Limit))
		} else {
			back, err = qr.Unqueue(r.ctx, *in.turn)
		}
		if err != nil {
			return r.fail("error", "%s: %s returned %v", desc, tg.Name, err)
		}
		refused = refused || (tg.Refused != nil && tg.Refused() != before)
		turns, backs = append(turns, t), append(backs, back)
	}
	if op.Kind == Unqueue {
		want, _ := r.model.Unqueue(r.ctx, *in.turn)
		r.trace = append(r.trace, fmt.Sprintf("%s: gave back %v", desc, backs[0]))
		for i, b := range backs {
			if b != want {
				return r.fail("model", "%s: target %d gave back %v, the model %v", desc, i, b, want)
			}
		}
		if want {
			r.stats.GivenBack++
		}
		if want {
			// Its stamp goes. A later one can only be a debit that
			// counted nothing (the bucket at its bound).
			for i := len(in.hist) - 1; i >= 0; i-- {
				if in.hist[i] == in.turnStamp {
					in.hist = slices.Delete(in.hist, i, i+1)
					break
				}
			}
			in.admitted, in.admitAt = in.turnAdmitted, in.turnAt
		}
		in.turn = nil
		return nil
	}
	r.trace = append(r.trace, fmt.Sprintf("%s: %s, delay %s", desc, fmtResult(turns[0].Result), turns[0].Delay))
	if refused {
		// A bounded store had no room: nothing was queued.
		return nil
	}
	want := r.model.QueueAt(key, q.Limit, q.Cost, queueWait(op.Kind, q.Limit), r.now)
	for i, t := range turns {
		if t != want {
			return r.fail("model", "%s: target %d queued %+v, the model %+v", desc, i, t, want)
		}
	}
	if f := r.invariants(desc, 0, q, want.Result); f != nil {
		return f
	}
	if !want.Allowed {
		return nil
	}
	if want.Delay > 0 {
		r.stats.Queued++
	}
	in.turn, in.turnAdmitted, in.turnAt = &want, in.admitted, in.admitAt
	// Counted at the instant it is admitted at, in µs of arrival time.
	at := max(r.now+want.Delay.Microseconds(), in.admitAt)
	in.admitted, in.admitAt = true, at
	in.turnStamp = stamp{at, q.Cost * q.Limit.EmissionInterval()}
	in.hist = append(in.hist, in.turnStamp)
	return r.bound(desc, q.Limit, in.hist)
}

// queueWait is the maximum wait of a queue op of l: one period, or
// MaxWait for QueueLong.
func queueWait(k Kind, l redlimit.Limit) time.Duration {
	if k == QueueLong {
		return redlimit.MaxWait
	}
	return l.Period
}
