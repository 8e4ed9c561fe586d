package memory

import (
	"math"
	"time"

	"github.com/redlimit/redlimit"
)

// The arithmetic here is the specification the Redis scripts in
// redisstore/lua follow step for step: times in integer microseconds, the
// sliding window's weighting in float64 with the same order of operations
// as the Lua code, so both stores give identical answers.

// params is a validated limit in microseconds.
type params struct {
	alg    redlimit.Algorithm
	window int64 // Period in µs
	count  int64
	burst  int64
	ei     int64 // token bucket emission interval, µs
	tau    int64 // token bucket tolerance: burst * ei
}

func newParams(l redlimit.Limit) params {
	p := params{alg: l.Algorithm, window: l.Period.Microseconds(), count: l.Count}
	if l.Algorithm == redlimit.TokenBucket {
		p.burst = l.Burst
		p.ei = l.EmissionInterval()
		p.tau = p.burst * p.ei
	}
	return p
}

// same reports whether p, made from a valid limit, is what newParams would
// make of l, a limit of the same algorithm and period: then l is valid too,
// and p decides for it without validating it or dividing again.
func (p *params) same(l *redlimit.Limit) bool {
	return l.Count == p.count && (l.Burst == p.burst || l.Algorithm != redlimit.TokenBucket) &&
		l.Failure <= redlimit.FailClosed
}

// entry is the state of one (key, algorithm, period), linked to the key's
// other entries.
type entry struct {
	// p is made from the limit of the last decision that validated one:
	// its algorithm and period identify the entry; its count and burst
	// tell whether the next request's limit is the same (then it need not
	// be validated again), and are replaced when they change.
	p    params
	next *entry

	// fixed_window: a = window index, b = count.
	// sliding_window: a = window index, b = its count, c = the previous window's count.
	// token_bucket: a = theoretical arrival time (µs).
	a, b, c int64
	log     ring  // sliding_log
	expires int64 // µs instant from which the entry holds no state
}

// pending is what a check decided to write, applied by commit.
type pending struct {
	a, b, c, expires int64
}

func us(d int64) time.Duration { return time.Duration(d) * time.Microsecond }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// check decides a request of cost n at now (µs) against e, which may be nil
// (no state). It writes the result to r and returns, when allowed, what
// commit must write. (The result goes through a pointer: returned by value
// through two calls, it cost a store-forwarding stall on every decision.)
func check(e *entry, p *params, now, n int64, r *redlimit.Result) pending {
	if e != nil && now >= e.expires {
		e = nil
	}
	switch p.alg {
	case redlimit.FixedWindow:
		return checkFixed(e, p, now, n, r)
	case redlimit.SlidingLog:
		return checkLog(e, p, now, n, r)
	case redlimit.SlidingWindow:
		return checkSliding(e, p, now, n, r)
	default:
		return checkGCRA(e, p, now, n, r)
	}
}

// commit applies an allowed check to e.
func commit(e *entry, p *params, now, n int64, w pending) {
	if p.alg == redlimit.SlidingLog {
		if now >= e.expires {
			e.log.clear()
		}
		e.log.trim(now - p.window)
		e.log.add(now, n, p.count)
	}
	e.a, e.b, e.c, e.expires = w.a, w.b, w.c, w.expires
}

func checkFixed(e *entry, p *params, now, n int64, r *redlimit.Result) pending {
	var w, end, c int64
	if e != nil && now < e.expires && now >= e.expires-p.window {
		w, end, c = e.a, e.expires, e.b // still the entry's window: no division
	} else {
		w = floorDiv(now, p.window)
		end = (w + 1) * p.window
		if e != nil && e.a == w {
			c = e.b
		}
	}
	*r = redlimit.Result{Limit: p.count}
	if c+n > p.count {
		r.Remaining = p.count - c
		r.RetryAfter = us(end - now)
		if n > p.count {
			r.RetryAfter = redlimit.Never
		}
		if c > 0 {
			r.ResetAfter = us(end - now)
		}
		return pending{}
	}
	r.Allowed = true
	r.Remaining = p.count - c - n
	r.ResetAfter = us(end - now)
	return pending{a: w, b: c + n, expires: end}
}

func checkLog(e *entry, p *params, now, n int64, r *redlimit.Result) pending {
	var lg *ring
	if e != nil {
		lg = &e.log
	}
	since := now - p.window // entries at or before since have expired
	c := lg.countAfter(since)
	*r = redlimit.Result{Limit: p.count}
	if c+n > p.count {
		r.Remaining = p.count - c
		if n > p.count {
			r.RetryAfter = redlimit.Never
		} else {
			// The (c+n-count)-th oldest live entry must expire first.
			r.RetryAfter = us(lg.nthAfter(since, c+n-p.count) + p.window - now)
		}
		if c > 0 {
			r.ResetAfter = us(lg.newest() + p.window - now)
		}
		return pending{}
	}
	newest := now
	if c > 0 && lg.newest() > now {
		newest = lg.newest()
	}
	r.Allowed = true
	r.Remaining = p.count - c - n
	r.ResetAfter = us(newest + p.window - now)
	return pending{expires: newest + p.window}
}

func checkSliding(e *entry, p *params, now, n int64, r *redlimit.Result) pending {
	W := p.window
	w := floorDiv(now, W)
	elapsed := now - w*W
	var cur, prev int64
	if e != nil {
		switch e.a {
		case w:
			cur, prev = e.b, e.c
		case w - 1:
			prev = e.b
		}
	}
	L := p.count
	est := float64(float64(prev)*float64(W-elapsed)/float64(W)) + float64(cur)
	room := float64(L) - est
	*r = redlimit.Result{Limit: L}
	if room < float64(n) {
		r.Remaining = max(0, int64(math.Floor(room)))
		switch {
		case n > L:
			r.RetryAfter = redlimit.Never
		case cur+n <= L:
			// The previous window's weight must fall until the cost fits.
			at := float64(W) - float64(float64(L-cur-n)*float64(W)/float64(prev))
			r.RetryAfter = us(int64(math.Ceil(at - float64(elapsed))))
		default:
			// Only in the next window, as this one's count fades.
			at := float64(W) - float64(float64(L-n)*float64(W)/float64(cur))
			r.RetryAfter = us(W - elapsed + int64(math.Ceil(at)))
		}
		switch {
		case cur > 0:
			r.ResetAfter = us(2*W - elapsed)
		case prev > 0:
			r.ResetAfter = us(W - elapsed)
		}
		return pending{}
	}
	r.Allowed = true
	r.Remaining = max(0, int64(math.Floor(room-float64(n))))
	r.ResetAfter = us(2*W - elapsed)
	return pending{a: w, b: cur + n, c: prev, expires: (w + 2) * W}
}

func checkGCRA(e *entry, p *params, now, n int64, r *redlimit.Result) pending {
	tat := now
	if e != nil && e.a > now {
		tat = e.a
	}
	next := tat + n*p.ei
	*r = redlimit.Result{Limit: p.burst}
	if next-now > p.tau {
		r.Remaining = (p.tau - (tat - now)) / p.ei
		r.RetryAfter = us(next - now - p.tau)
		if n > p.burst {
			r.RetryAfter = redlimit.Never
		}
		r.ResetAfter = us(tat - now)
		return pending{}
	}
	r.Allowed = true
	r.Remaining = (p.tau - (next - now)) / p.ei
	r.ResetAfter = us(next - now)
	return pending{a: next, expires: next}
}
