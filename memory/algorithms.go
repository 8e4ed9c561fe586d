package memory

import (
	"math/bits"
	"time"

	"github.com/redlimit/redlimit"
)

// The arithmetic here is the specification the Redis scripts in
// redisstore/lua follow step for step. So both stores give identical
// answers. It is exact integer arithmetic, in microseconds. Every quantity
// stays below 2^53 for the bounds in limit.go and times up to 2^52 µs (the
// year 2112). So a Lua number (a float64) holds it exactly too. One
// product can pass 2^53: the sliding window's weighting. It goes through
// mulDiv here and an exact routine in Lua.

// params is a validated limit in microseconds.
type params struct {
	alg    redlimit.Algorithm
	window int64 // Period in µs
	count  int64
	burst  int64
	ei     int64 // token bucket emission interval, µs
	tau    int64 // token bucket tolerance: burst * ei
	// cal aligns a fixed window to calendar periods: its windows are
	// named by their end (µs), not by their number from the epoch.
	cal redlimit.Calendar
}

func newParams(l redlimit.Limit) params {
	p := params{alg: l.Algorithm, window: l.Period.Microseconds(), count: l.Count, cal: l.Calendar.Canonical()}
	if l.Algorithm == redlimit.TokenBucket {
		p.burst = l.Burst
		p.ei = l.EmissionInterval()
		p.tau = p.burst * p.ei
	}
	return p
}

// same reports whether p, made from a valid limit, is what newParams would
// make of l, a limit of the same algorithm and period. Then l is valid
// too. p decides for it without validating it or dividing again.
func (p *params) same(l *redlimit.Limit) bool {
	return l.Count == p.count && (l.Burst == p.burst || l.Algorithm != redlimit.TokenBucket) &&
		l.Failure <= redlimit.FailClosed
}

// entry is the state of one (key, algorithm, period), linked to the key's
// other entries.
type entry struct {
	// p is made from the limit of the last decision that validated one.
	// Its algorithm and period identify the entry. Its count and burst
	// tell whether the next request's limit is the same; then it need not
	// be validated again. They are replaced when they change.
	p    params
	next *entry
	// id tells this entry from any other the store made, so that a
	// Grant's receipt finds it without holding it (see wrote).
	id uint64

	// The state of the entry's algorithm; the others' stay zero.
	windows windowState // fixed_window, sliding_window
	bucket  bucketState // token_bucket
	log     ring        // sliding_log
	expires int64       // µs instant from which the entry holds no state
	// retired is what windows held before its latest window was made,
	// until the next new window. The Redis scripts keep it in "p<index>"
	// fields (lua/windows.lua). A refund that empties the latest window
	// brings it back (restore). So the key is as if the request never came.
	retired windowState
}

// windowState is the state of a fixed or sliding window: its counts by
// window, as in the Redis scripts' hash (redisstore/lua/windows.lua). One
// type serves both algorithms, so that an entry holds three words for
// either; a fixed window leaves prev at 0.
type windowState struct {
	index int64 // the key's latest window: a time in µs / the period, rounded down
	count int64 // its count
	prev  int64 // sliding_window: the count of the window before it
}

// bucketState is the state of a token bucket (GCRA).
type bucketState struct {
	tat int64       // theoretical arrival time, µs
	rec *refundable // nil until an Admit counted a request in the bucket
}

// update is what an allowed check writes to its entry, applied by commit.
// It holds when the new state expires and, for a window algorithm, its
// windows. A token bucket's new TAT is its expiry: the bucket is full
// again then. A sliding log's new entry is one period before its expiry.
// So neither needs a field. Kept small, an update is returned in registers
// (BenchmarkAllowN).
type update struct {
	windows windowState // fixed_window, sliding_window
	expires int64
}

func us(d int64) time.Duration { return time.Duration(d) * time.Microsecond }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// check decides a request of cost n at now (µs) against e, which may be
// nil (no state). It writes the result to r. r is a pointer, so the result
// is not copied through two calls (BenchmarkAllowN). When allowed, check
// returns what commit must write.
//
// A state expires at e.expires. Before that, a request may come at an
// instant earlier than the key's state: a clock that went back. It is
// decided by the rules in the package documentation. They never admit
// more than the limit, and the Redis scripts follow them too.
func check(e *entry, p *params, now, n int64, r *redlimit.Result) update {
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
func commit(e *entry, p *params, now, n int64, w update) {
	if p.alg == redlimit.SlidingLog {
		if now >= e.expires {
			e.log.clear()
		}
		// The new entry's time is never before the newest; what is at or
		// before it less the window has expired for good.
		at := w.expires - p.window
		e.log.trim(at - p.window)
		e.log.add(at, n)
	}
	if p.alg == redlimit.TokenBucket {
		e.bucket.tat = w.expires
		if r := e.bucket.rec; r != nil {
			r.last = max(r.last, now)
		}
	}
	if p.alg == redlimit.FixedWindow || p.alg == redlimit.SlidingWindow {
		if w.windows.index != e.windows.index {
			e.retired = e.windows
		}
	}
	e.windows, e.expires = w.windows, w.expires
}

// maxPeriodMicros is MaxPeriod in µs: how far beyond its burst a token
// bucket's debt may reach.
const maxPeriodMicros = int64(redlimit.MaxPeriod / time.Microsecond)

// maxTAT is the latest arrival time a debit sets, in µs after the epoch
// (the year 2255): the largest a Lua number holds exactly.
const maxTAT = 1 << 53

// debitUpdate returns what commit must write to count a debit of cost n at now
// against e (nil: no state). It also returns the units it counts. That is
// all of n, or what fits within the saturation bound ([redlimit.MaxCost])
// judged by p. A window's count, or a sliding log's units of the period,
// go up to count + MaxCost. A token bucket's arrival time goes at most
// tau + MaxPeriod ahead of now, and never back. It reports n when it
// moves, and 0 when it is at the bound already. Nothing is to be written
// when it counts 0. debitUpdate is for a debit that does not fit. One that
// fits is counted as an admission is (its check's update). The bound is
// then far off.
func debitUpdate(e *entry, p *params, now, n int64) (update, int64) {
	if e != nil && now >= e.expires {
		e = nil
	}
	room := func(c int64) int64 { return min(n, max(0, p.count+redlimit.MaxCost-c)) }
	switch p.alg {
	case redlimit.FixedWindow:
		w, end, c := fixedWindow(e, p, now)
		a := room(c)
		return update{windows: windowState{index: w, count: c + a}, expires: end}, a
	case redlimit.SlidingWindow:
		w, cur, prev := slidingWindows(e, p, now)
		a := room(cur)
		return update{windows: windowState{index: w, count: cur + a, prev: prev}, expires: w*p.window + 2*p.window}, a
	case redlimit.SlidingLog:
		t := now
		var lg *ring
		if e != nil && e.log.n > 0 {
			lg = &e.log
			t = max(t, lg.newest())
		}
		_, c := lg.live(t - p.window)
		return update{expires: t + p.window}, room(c)
	default:
		var d int64
		if e != nil && e.bucket.tat > now {
			d = e.bucket.tat - now
		}
		// bound - d is positive below: d is less than bound, which is below
		// 2^53; n*ei is compared without being made. The arrival time stays
		// at most 2^53 µs after the epoch, which a Lua number holds exactly.
		bound := min(p.tau+maxPeriodMicros, maxTAT-now)
		switch {
		case d >= bound:
			return update{}, 0 // a clock that went back: never lowered
		case n <= (bound-d)/p.ei:
			d += n * p.ei
		default:
			d = bound
		}
		return update{expires: now + d}, n
	}
}

// fixedWindow returns the window a request at now is counted in, when it
// ends, and its count. A live state is the key's latest window: the window
// of now, or a later one if the clock went back, which counts the request.
func fixedWindow(e *entry, p *params, now int64) (w, end, c int64) {
	if e != nil {
		return e.windows.index, e.expires, e.windows.count
	}
	if !p.cal.IsZero() {
		w = p.cal.WindowEnd(now)
		return w, w, 0
	}
	w = floorDiv(now, p.window)
	return w, (w + 1) * p.window, 0
}

// fixedEnd returns the end (µs) of a fixed window named index.
func (p *params) fixedEnd(index int64) int64 {
	if !p.cal.IsZero() {
		return index
	}
	return (index + 1) * p.window
}

// slidingWindows returns the window a request at now is counted in, its
// count and the count of the window before it. That window is the key's
// latest: the window of now, or a later one if the clock went back. The
// request is entered at its start.
func slidingWindows(e *entry, p *params, now int64) (w, cur, prev int64) {
	w = floorDiv(now, p.window)
	if e != nil {
		switch {
		case e.windows.index >= w:
			return e.windows.index, e.windows.count, e.windows.prev
		case e.windows.index == w-1:
			prev = e.windows.count
		}
	}
	return w, 0, prev
}

func checkFixed(e *entry, p *params, now, n int64, r *redlimit.Result) update {
	w, end, c := fixedWindow(e, p, now)
	*r = redlimit.Result{Max: p.count}
	if c+n > p.count {
		r.Remaining = max(0, p.count-c) // c exceeds count after the count shrank
		r.RetryAfter = us(end - now)
		if n > p.count {
			r.RetryAfter = redlimit.Never
		}
		if c > 0 {
			r.ResetAfter = us(end - now)
		}
		return update{}
	}
	r.Allowed = true
	r.Remaining = p.count - c - n
	r.ResetAfter = us(end - now)
	return update{windows: windowState{index: w, count: c + n}, expires: end}
}

func checkLog(e *entry, p *params, now, n int64, r *redlimit.Result) update {
	L, W := p.count, p.window
	// The request is decided, and stamped, at t: now, or the newest
	// entry's time if the clock went back before it.
	t := now
	var lg *ring
	if e != nil && e.log.n > 0 {
		lg = &e.log
		t = max(t, lg.newest())
	}
	first, c := lg.live(t - W)
	*r = redlimit.Result{Max: L}
	if c+n > L {
		r.Remaining = max(0, L-c) // c exceeds count after the count shrank
		if n > L {
			r.RetryAfter = redlimit.Never
		} else {
			// The (c+n-L)-th oldest live unit must expire first.
			r.RetryAfter = us(lg.unitAt(first, c+n-L) + W - now)
		}
		if c > 0 {
			r.ResetAfter = us(lg.newest() + W - now)
		}
		return update{}
	}
	r.Allowed = true
	r.Remaining = L - c - n
	r.ResetAfter = us(t + W - now)
	return update{expires: t + W}
}

func checkSliding(e *entry, p *params, now, n int64, r *redlimit.Result) update {
	W := p.window
	w, cur, prev := slidingWindows(e, p, now)
	start := w * W
	elapsed := max(now, start) - start
	L := p.count
	// The estimate of the last period is cur plus prev weighted. The
	// weight is the part of the previous window the period still covers.
	// It is rounded up to a whole request. A request fits while
	// cur + weighted + n <= L. In exact arithmetic, that is
	// L - (prev*(W-elapsed)/W + cur) >= n. prev*(W-elapsed) can pass 2^63;
	// mulDiv is exact.
	weighted, rest := mulDiv(prev, W-elapsed, W)
	if rest > 0 {
		weighted++
	}
	room := L - cur - weighted // may be negative after the count shrank
	*r = redlimit.Result{Max: L}
	if room < n {
		r.Remaining = max(0, room)
		switch {
		case n > L:
			r.RetryAfter = redlimit.Never
		case cur+n <= L:
			// The previous window's weight must fall to L-cur-n: at the
			// elapsed time W - floor((L-cur-n)*W/prev). prev > 0 here.
			q, _ := mulDiv(L-cur-n, W, prev)
			r.RetryAfter = us(start + W - q - now)
		default:
			// Only in the next window, as this one's count fades to L-n.
			// cur > L-n >= 0 here.
			q, _ := mulDiv(L-n, W, cur)
			r.RetryAfter = us(start + 2*W - q - now)
		}
		switch {
		case cur > 0:
			r.ResetAfter = us(start + 2*W - now)
		case prev > 0:
			r.ResetAfter = us(start + W - now)
		}
		return update{}
	}
	r.Allowed = true
	r.Remaining = room - n
	r.ResetAfter = us(start + 2*W - now)
	return update{windows: windowState{index: w, count: cur + n, prev: prev}, expires: start + 2*W}
}

// mulDiv returns floor(a*b/c) and the remainder, for a, b >= 0 and c > 0
// whose quotient fits 64 bits; the product need not.
func mulDiv(a, b, c int64) (q, rest int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	uq, ur := bits.Div64(hi, lo, uint64(c))
	return int64(uq), int64(ur)
}

func checkGCRA(e *entry, p *params, now, n int64, r *redlimit.Result) update {
	// d is how far the theoretical arrival time is ahead of now (0 for a
	// full bucket). It is at most a tolerance (2^52 µs). After the clock
	// went back, it is up to 2^53 µs less now; the TAT never goes back.
	// Everything below is relative to now. No sum passes 2^53, which a Lua
	// number no longer holds exactly. Neither tat + n*ei does, nor
	// d + n*ei before it is known to be within tau.
	var d int64
	if e != nil && e.bucket.tat > now {
		d = e.bucket.tat - now
	}
	*r = redlimit.Result{Max: p.burst}
	if n > p.burst {
		// It can never pass, and n*ei could overflow.
		r.Remaining = max(0, (p.tau-d)/p.ei)
		r.RetryAfter = redlimit.Never
		r.ResetAfter = us(d)
		return update{}
	}
	// over is due - tau, due being d + n*ei: d - tau is below 2^53 - now,
	// and n*ei at most tau.
	over := d - p.tau + n*p.ei
	if over > 0 {
		// d exceeds tau only after the burst or rate shrank, or the clock
		// went back: then nothing remains.
		r.Remaining = max(0, (p.tau-d)/p.ei)
		r.RetryAfter = us(over)
		r.ResetAfter = us(d)
		return update{}
	}
	due := d + n*p.ei // at most tau
	r.Allowed = true
	r.Remaining = (p.tau - due) / p.ei
	r.ResetAfter = us(due)
	return update{expires: now + due}
}
