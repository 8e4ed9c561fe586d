package model

import (
	"fmt"
	"slices"
	"time"

	"github.com/redlimit/redlimit"
)

// invariants checks what every result must satisfy on its own.
func (r *runner) invariants(desc string, i int, q Req, res redlimit.Result) *Failure {
	bad := func(format string, args ...any) *Failure {
		return r.fail("invariant", "%s: request %d answered %+v: %s", desc, i, res, fmt.Sprintf(format, args...))
	}
	switch {
	case res.Max != q.Limit.Max():
		return bad("Max is not %d", q.Limit.Max())
	case res.Remaining < 0 || res.Remaining > res.Max:
		return bad("Remaining is not in [0, Max]")
	case res.Source != redlimit.FromStore:
		return bad("Source is not FromStore")
	case res.RetryAfter%time.Microsecond != 0 && res.RetryAfter != redlimit.Never, res.ResetAfter%time.Microsecond != 0:
		return bad("a duration is not a whole number of microseconds")
	case res.ResetAfter < 0:
		return bad("ResetAfter is negative")
	}
	if res.Allowed {
		switch {
		case q.Cost > res.Max:
			return bad("allowed a cost above Max")
		case res.RetryAfter != 0:
			return bad("allowed with a RetryAfter")
		case res.Remaining > res.Max-q.Cost:
			return bad("Remaining after the request is above Max - cost")
		case res.ResetAfter <= 0:
			return bad("allowed, so not at a full allowance, yet ResetAfter is 0")
		}
		return nil
	}
	switch {
	case res.RetryAfter <= 0:
		return bad("denied with RetryAfter %s", res.RetryAfter)
	case (res.RetryAfter == redlimit.Never) != (q.Cost > res.Max):
		return bad("RetryAfter is Never if and only if the cost is above Max")
	case res.Remaining >= q.Cost:
		return bad("denied although Remaining covers the cost")
	case res.ResetAfter == 0 && res.Remaining != res.Max:
		return bad("ResetAfter 0 (full allowance) with Remaining below Max")
	}
	return nil
}

// refusalInvariants checks a denial where the model allows. It comes from
// a store that refused the request for want of room. It tells the client
// to retry in a millisecond at least, or never if the store can never hold
// it.
func (r *runner) refusalInvariants(desc string, i int, q Req, res redlimit.Result) *Failure {
	bad := func(format string, args ...any) *Failure {
		return r.fail("invariant", "%s: request %d refused for want of room with %+v: %s", desc, i, res, fmt.Sprintf(format, args...))
	}
	switch {
	case res.Allowed:
		return bad("Allowed")
	case res.Max != q.Limit.Max():
		return bad("Max is not %d", q.Limit.Max())
	case res.Remaining != 0:
		return bad("Remaining is not 0")
	case res.Source != redlimit.FromStore:
		return bad("Source is not FromStore")
	case res.RetryAfter < time.Millisecond:
		return bad("RetryAfter is below a millisecond")
	case res.RetryAfter%time.Microsecond != 0 && res.RetryAfter != redlimit.Never, res.ResetAfter%time.Microsecond != 0:
		return bad("a duration is not a whole number of microseconds")
	case res.ResetAfter < 0:
		return bad("ResetAfter is negative")
	}
	return nil
}

// admit records an admission, or a debit, and commits it to the model.
// When it fit, the admission bounds of the exact algorithms are checked.
// A debit that fits is counted as an admission is. The bounds count each
// request at the instant the clock-back rules count it at. That is no
// earlier than the latest one counted; for a window algorithm, no earlier
// than its window's start. They count what each request counted. A debit
// that did not fit counts up to its bound. A token bucket counts in µs of
// arrival time.
func (r *runner) admit(desc string, q Req, in *info, fit bool) *Failure {
	l, n := q.Limit, q.Cost
	at := r.now
	if in.admitted {
		switch l.Algorithm {
		case redlimit.FixedWindow, redlimit.SlidingWindow:
			at = max(at, windowStart(l, in.admitAt))
		default:
			at = max(at, in.admitAt)
		}
	}
	counted := n
	if q.Debit {
		_, counted = r.model.DebitAt(r.env.Key(q.Key), l, n, r.now)
	} else {
		r.model.CommitAt(r.env.Key(q.Key), l, n, r.now)
		if l.Algorithm == redlimit.TokenBucket {
			counted = n * l.EmissionInterval()
		}
	}
	in.admitted, in.admitAt = true, at
	in.hist = append(in.hist, stamp{at, counted})
	if len(in.hist) > 1024 {
		in.hist = slices.Delete(in.hist, 0, len(in.hist)-1024)
	}
	if fit {
		if f := r.bound(desc, l, in.hist); f != nil {
			return f
		}
	}
	if in.refundAt != 0 && !in.split && r.now >= in.refundAt {
		// Every target's arrival time is now + cost: the same again.
		in.refundAt = 0
	}
	return nil
}

// windowStart returns the start (µs) of the fixed or sliding window of t.
func windowStart(l redlimit.Limit, t int64) int64 {
	if !l.Calendar.IsZero() {
		start, _ := l.Calendar.Window(time.UnixMicro(t))
		return start.UnixMicro()
	}
	W := l.Period.Microseconds()
	return floorDiv(t, W) * W
}

// bound checks that the admissions in hist stay within l; the last one
// was just made under l. The fixed and sliding windows hold per window.
// The sliding log holds in every period-long interval. The token bucket
// holds burst plus what the rate earns.
func (r *runner) bound(desc string, l redlimit.Limit, hist []stamp) *Failure {
	last := hist[len(hist)-1]
	W := l.Period.Microseconds()
	sum := func(lo, hi int64) int64 { // admitted in [lo, hi]
		var c int64
		for _, s := range hist {
			if s.t >= lo && s.t <= hi {
				c += s.n
			}
		}
		return c
	}
	over := func(what string, got, limit int64) *Failure {
		return r.fail("admitted", "%s: %d admitted %s, limit %d (admissions: %v)", desc, got, what, limit, hist[max(0, len(hist)-20):])
	}
	switch l.Algorithm {
	case redlimit.FixedWindow, redlimit.SlidingWindow:
		w, end := windowOf(l, last.t)
		if c := sum(windowStart(l, last.t), end-1); c > l.Count {
			return over(fmt.Sprintf("in window %d", w), c, l.Count)
		}
	case redlimit.SlidingLog:
		// Every interval of one period that holds the new admission.
		ends := []int64{last.t}
		for _, s := range hist {
			if s.t > last.t && s.t < last.t+W {
				ends = append(ends, s.t)
			}
		}
		for _, a := range ends {
			if c := sum(a-W+1, a); c > l.Count {
				return over(fmt.Sprintf("in (%d, %d] µs", a-W, a), c, l.Count)
			}
		}
	case redlimit.TokenBucket:
		// In µs of arrival time: Burst + floor(d/T) tokens in d µs is
		// Burst*T + d µs of them.
		T := l.EmissionInterval()
		for _, s := range hist {
			if s.t > last.t {
				continue
			}
			allowance := l.Burst*T + (last.t - s.t)
			if c := sum(s.t, last.t); c > allowance {
				return over(fmt.Sprintf("µs of arrival time in [%d, %d] µs", s.t, last.t), c, allowance)
			}
		}
	}
	return nil
}

// honest checks RetryAfter and ResetAfter by asking the model, which
// answered as the reference store did, at the instants they name and 1 µs
// before. actual says the result describes the state as it now is (it was
// committed, or denied). own, for a denied AllowAll, holds each store's
// answer, which Peek must repeat: nothing was consumed.
func (r *runner) honest(desc string, i int, q Req, in *info, res redlimit.Result, actual bool, own []redlimit.Result) *Failure {
	key := r.env.Key(q.Key)
	ask := func(at, n int64) redlimit.Result {
		r.stats.Probes++
		return r.model.PeekAt(key, q.Limit, n, at)
	}
	dishonest := func(check, what string, at int64, p redlimit.Result) *Failure {
		return r.fail(check, "%s: request %d (%s) answered %s, so %s; but at %s (now+%s) the model answers Peek %s",
			desc, i, r.flags(in), fmtResult(res), what, us(at-r.start.UnixMicro()), us(at-r.now), fmtResult(p))
	}
	now := r.now
	if !res.Allowed && res.RetryAfter != redlimit.Never {
		at := now + res.RetryAfter.Microseconds()
		if p := ask(at, q.Cost); !p.Allowed {
			return dishonest("retry-after", "the same cost should pass then", at, p)
		}
		if p := ask(at-1, q.Cost); p.Allowed {
			return dishonest("retry-after", "the same cost should not pass 1µs before", at-1, p)
		}
	}
	if actual {
		at := now + res.ResetAfter.Microseconds()
		full := func(p redlimit.Result) bool { return p.Allowed && p.Remaining == p.Max-1 }
		if p := ask(at, 1); !full(p) {
			return dishonest("reset-after", "the allowance should be full then", at, p)
		}
		if res.ResetAfter > 0 {
			if p := ask(at-1, 1); full(p) {
				return dishonest("reset-after", "the allowance should not be full 1µs before", at-1, p)
			}
		}
	}
	if own != nil {
		// Each result of a denied decision is what Peek answers now:
		// nothing was consumed, on any store.
		for t, tg := range r.env.Targets {
			var before uint64
			if tg.Refused != nil {
				before = tg.Refused()
			}
			p, err := tg.Limiter.Peek(r.ctx, key, q.Limit, q.Cost)
			if err != nil {
				return r.fail("error", "%s: peek: %s: %v", desc, tg.Name, err)
			}
			// A store with no room refuses a check the decision, denied
			// by other limits, answered for this limit alone.
			if refused := tg.Refused != nil && tg.Refused() != before; refused && own[t].Allowed {
				if f := r.refusalInvariants(desc, i, q, p); f != nil {
					return f
				}
				continue
			}
			if p != own[t] {
				return r.fail("atomic", "%s: request %d (%s) answered %s in a denied decision, but Peek now answers %s from %s",
					desc, i, r.flags(in), fmtResult(own[t]), fmtResult(p), tg.Name)
			}
		}
	}
	return nil
}
