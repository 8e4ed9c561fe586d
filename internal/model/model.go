package model

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/micros"
)

// Model is the reference limiter. Each algorithm is written from its
// definition over the plainest state that holds it. The stores are
// compared with it. It keeps every admitted request: a sliding log is a
// list of timestamps, a fixed or sliding window a map from window index to
// count. So it is slow and unbounded. It never forgets anything: what has
// expired simply counts for nothing. It is safe for concurrent use.
//
// The rules the stores document where the definitions leave a choice:
//   - a limit whose Count or Burst changed keeps the state already made,
//     judged by the new limit, with Remaining never below 0;
//   - a request at an instant before what the key has recorded: a clock
//     that went back. The fixed and sliding windows count it in the key's
//     latest window, as if made at that window's start. The sliding log
//     decides it at, and stamps it with, the time of its newest entry. The
//     token bucket's theoretical arrival time never goes back.
//
// Debits ([redlimit.Request.Debit]) are counted whatever the decision. One
// that fits is counted as an admission is. One that does not is counted up
// to the bounds [redlimit.MaxCost] documents, judged by the request's
// limit. A window's count, or the log's units of the period, go up to
// Count + MaxCost. A bucket's arrival time goes at most Burst*T +
// MaxPeriod ahead of now, and 2^53 µs after the epoch. It is never moved
// back. A debit's Result is the answer for the key after it was counted.
// That is the admission's if it fit, else what Peek of the same cost
// answers then. A sliding log keeps one stamp per instant. After a debit,
// it moves the units of its oldest live stamp into the next, at most
// twice. It does so while the live stamps after the oldest hold at least
// Count units. Those units could no longer change an answer under that
// Count. This keeps the stores' logs bounded; the stores do exactly the
// same.
//
// RetryAfter is found by its definition where no formula is plain: the
// first instant at which the same request would pass, if nothing else
// happened.
type Model struct {
	now    func() time.Time
	mu     sync.Mutex
	states map[redlimit.StateID]*state
}

var _ redlimit.Limiter = (*Model)(nil)

// state is every algorithm's state; each uses its own fields.
type state struct {
	log     []stamp         // sliding log: admitted requests, in arrival order
	windows map[int64]int64 // fixed and sliding window: count per window index
	tat     int64           // token bucket: theoretical arrival time, µs
}

// stamp is n units of cost admitted at t (µs).
type stamp struct{ t, n int64 }

// New returns a Model that reads the time from now.
func New(now func() time.Time) *Model {
	return &Model{now: now, states: make(map[redlimit.StateID]*state)}
}

// micros is the time in µs, within the range the stores compute with.
func (m *Model) micros() int64 { return micros.Of(m.now()) }

// AllowN implements [redlimit.Limiter].
func (m *Model) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return redlimit.Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.micros()
	r := m.decide(key, limit, n, now)
	if r.Allowed {
		m.commit(key, limit, n, now)
	}
	return r, nil
}

// Peek implements [redlimit.Limiter].
func (m *Model) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if err := redlimit.ValidateRequest(key, limit, n); err != nil {
		return redlimit.Result{}, fmt.Errorf("model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return redlimit.Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decide(key, limit, n, m.micros()), nil
}

// PeekAt is Peek at the instant now (µs since the Unix epoch) instead of the
// clock's. The limit must be valid.
func (m *Model) PeekAt(key string, limit redlimit.Limit, n, now int64) redlimit.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decide(key, limit, n, now)
}

// CommitAt records an admission of cost n under limit at now (µs), as an
// allowed AllowN does, without deciding: the caller decided. n must not
// exceed limit.Max().
func (m *Model) CommitAt(key string, limit redlimit.Limit, n, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commit(key, limit, n, now)
}

// Reset implements [redlimit.Limiter].
func (m *Model) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if err := redlimit.ValidateRequest(key, limit, 1); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.Forget(key, limit)
	return nil
}

// Forget drops the state of key under limit, as Reset does, without
// validating.
func (m *Model) Forget(key string, limit redlimit.Limit) {
	m.mu.Lock()
	delete(m.states, limit.StateID(key))
	m.mu.Unlock()
}

// AllowAll implements [redlimit.Limiter]: every limit is decided at one
// instant, and committed only if all allow.
func (m *Model) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return redlimit.Decision{}, fmt.Errorf("model: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return redlimit.Decision{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.micros()
	d := redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs))}
	for i, r := range reqs {
		d.Results[i] = m.decide(r.Key, r.Limit, r.Cost, now)
		d.Allowed = d.Allowed && d.Results[i].Allowed
	}
	for i, r := range reqs {
		switch {
		case d.Allowed || r.Debit && d.Results[i].Allowed:
			m.commit(r.Key, r.Limit, r.Cost, now)
		case r.Debit:
			d.Results[i], _ = m.debit(r.Key, r.Limit, r.Cost, now)
		}
	}
	return d, nil
}

// DebitAt counts a debit of cost n under limit at now (µs), as a request
// with Debit does. It returns its Result and what it counted: units of
// cost (a window's, a log's), or µs of arrival time (a bucket's). The
// limit must be valid.
func (m *Model) DebitAt(key string, limit redlimit.Limit, n, now int64) (redlimit.Result, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.decide(key, limit, n, now); r.Allowed {
		st := m.get(key, limit)
		var before int64
		if st != nil {
			before = st.tat
		}
		m.commit(key, limit, n, now)
		if limit.Algorithm == redlimit.TokenBucket {
			return r, m.get(key, limit).tat - max(before, now)
		}
		return r, n
	}
	return m.debit(key, limit, n, now)
}

// PeekDebitAt returns what DebitAt would answer, without counting anything.
func (m *Model) PeekDebitAt(key string, limit redlimit.Limit, n, now int64) redlimit.Result {
	m.mu.Lock()
	k := limit.StateID(key)
	st := m.states[k]
	m.mu.Unlock()
	c := New(m.now)
	if st != nil {
		c.states[k] = &state{log: slices.Clone(st.log), windows: maps.Clone(st.windows), tat: st.tat}
	}
	r, _ := c.DebitAt(key, limit, n, now)
	return r
}

// debit counts a debit of cost n that does not fit, up to its bound, and
// returns what Peek answers then and what it counted.
func (m *Model) debit(key string, l redlimit.Limit, n, now int64) (redlimit.Result, int64) {
	k := l.StateID(key)
	st := m.states[k]
	if st == nil {
		st = &state{windows: make(map[int64]int64)}
		m.states[k] = st
	}
	bound := l.Count + redlimit.MaxCost // of a window's count, or a log's live units
	var counted int64
	switch l.Algorithm {
	case redlimit.FixedWindow, redlimit.SlidingWindow:
		w := st.window(l, now)
		counted = min(n, max(0, bound-st.windows[w]))
		st.windows[w] += counted
	case redlimit.SlidingLog:
		t := st.logTime(now)
		counted = min(n, max(0, bound-st.liveUnits(l, t)))
		if counted > 0 {
			st.stamp(t, counted)
			st.merge(l, t)
		}
	default:
		// The arrival time goes n emission intervals on, to at most
		// now + tau + MaxPeriod and 2^53 µs after the epoch, and never back. (Big numbers: n*T may
		// overflow.)
		T := l.EmissionInterval()
		limit := min(now+l.Burst*T+int64(redlimit.MaxPeriod/time.Microsecond), 1<<53)
		next := new(big.Int).Mul(big.NewInt(n), big.NewInt(T))
		next.Add(next, big.NewInt(max(st.tat, now)))
		tat := max(st.tat, min(limit, clampInt64(next)))
		counted = tat - max(st.tat, now)
		st.tat = tat
	}
	return m.decide(key, l, n, now), counted
}

// clampInt64 returns x, or MaxInt64 if it is larger.
func clampInt64(x *big.Int) int64 {
	if x.IsInt64() {
		return x.Int64()
	}
	return math.MaxInt64
}

func (m *Model) get(key string, l redlimit.Limit) *state {
	return m.states[l.StateID(key)]
}

// decide answers a request of cost n under l at now without changing anything.
func (m *Model) decide(key string, l redlimit.Limit, n, now int64) redlimit.Result {
	st := m.get(key, l)
	if st == nil {
		st = &state{}
	}
	switch l.Algorithm {
	case redlimit.FixedWindow:
		return fixedWindow(st, l, n, now)
	case redlimit.SlidingLog:
		return slidingLog(st, l, n, now)
	case redlimit.SlidingWindow:
		return slidingWindow(st, l, n, now)
	default:
		return tokenBucket(st, l, n, now)
	}
}

// commit records an allowed request of cost n under l at now.
func (m *Model) commit(key string, l redlimit.Limit, n, now int64) {
	k := l.StateID(key)
	st := m.states[k]
	if st == nil {
		st = &state{windows: make(map[int64]int64)}
		m.states[k] = st
	}
	switch l.Algorithm {
	case redlimit.FixedWindow, redlimit.SlidingWindow:
		st.windows[st.window(l, now)] += n
	case redlimit.SlidingLog:
		st.stamp(st.logTime(now), n)
	default:
		st.tat = max(st.tat, now) + n*l.EmissionInterval() // n <= Burst: allowed
	}
}

// windowOf returns the fixed or sliding window of now under l and its
// end (µs): a number from the epoch, or a calendar window named by its end.
func windowOf(l redlimit.Limit, now int64) (w, end int64) {
	if !l.Calendar.IsZero() {
		_, e := l.Calendar.Window(time.UnixMicro(now))
		return e.UnixMicro(), e.UnixMicro()
	}
	W := l.Period.Microseconds()
	w = floorDiv(now, W)
	return w, (w + 1) * W
}

// windowEnd returns the end (µs) of the fixed window named w under l.
func windowEnd(l redlimit.Limit, w int64) int64 {
	if !l.Calendar.IsZero() {
		return w
	}
	return (w + 1) * l.Period.Microseconds()
}

// us turns µs into a Duration.
func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// floorDiv is a/b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// window returns the window a request at now counts in under the window
// algorithm l: the window of now, or the key's latest if later.
func (st *state) window(l redlimit.Limit, now int64) int64 {
	w, _ := windowOf(l, now)
	for v := range st.windows {
		w = max(w, v)
	}
	return w
}

// logTime returns the instant a sliding log decides a request at now at:
// now, or the newest stamp if later.
func (st *state) logTime(now int64) int64 {
	t := now
	for _, s := range st.log {
		t = max(t, s.t)
	}
	return t
}

// stamp adds n units at t, no earlier than the newest stamp: to it if it is
// at t.
func (st *state) stamp(t, n int64) {
	if k := len(st.log); k > 0 && st.log[k-1].t == t {
		st.log[k-1].n += n
		return
	}
	st.log = append(st.log, stamp{t, n})
}

// liveUnits returns the units a sliding log l counts at t: those stamped
// less than a period before.
func (st *state) liveUnits(l redlimit.Limit, t int64) int64 {
	var c int64
	for _, s := range st.live(l, t) {
		c += s.n
	}
	return c
}

// live returns the index of the first stamp that counts at t, and the
// stamps from it on.
func (st *state) live(l redlimit.Limit, t int64) []stamp {
	for i, s := range st.log {
		if t-s.t < l.Period.Microseconds() {
			return st.log[i:]
		}
	}
	return nil
}

// merge moves the units of the oldest stamp that counts at t into the next
// while the stamps after it hold at least Count units, at most twice.
func (st *state) merge(l redlimit.Limit, t int64) {
	for range 2 {
		live := st.live(l, t)
		if len(live) < 2 {
			return
		}
		var later int64
		for _, s := range live[1:] {
			later += s.n
		}
		if later < l.Count {
			return
		}
		live[1].n += live[0].n
		i := len(st.log) - len(live)
		st.log = slices.Delete(st.log, i, i+1)
	}
}

// fixedWindow: windows of W µs aligned to the Unix epoch; window w holds the
// instants [w*W, (w+1)*W) and admits at most Count units. A calendar
// window is named by its end instead.
func fixedWindow(st *state, l redlimit.Limit, n, now int64) redlimit.Result {
	L := l.Count
	w := st.window(l, now)
	end := windowEnd(l, w)
	c := st.windows[w]
	r := redlimit.Result{Max: L}
	if c+n <= L {
		r.Allowed = true
		r.Remaining = L - c - n
		r.ResetAfter = us(end - now) // this window now holds something
		return r
	}
	r.Remaining = max(0, L-c)
	r.RetryAfter = us(end - now) // the next window is empty
	if n > L {
		r.RetryAfter = redlimit.Never
	}
	if c > 0 {
		r.ResetAfter = us(end - now)
	}
	return r
}

// slidingLog: a unit admitted at t counts while now - t < W, that is for the
// instants t .. t+W-1 µs; at most Count units count at once.
func slidingLog(st *state, l redlimit.Limit, n, now int64) redlimit.Result {
	W, L := l.Period.Microseconds(), l.Count
	t := st.logTime(now)
	var live []stamp
	var c int64
	newest := int64(math.MinInt64)
	for _, s := range st.log {
		if t-s.t < W {
			live = append(live, s)
			c += s.n
			newest = max(newest, s.t)
		}
	}
	r := redlimit.Result{Max: L}
	if c+n <= L {
		r.Allowed = true
		r.Remaining = L - c - n
		r.ResetAfter = us(t + W - now) // when the new units stop counting
		return r
	}
	r.Remaining = max(0, L-c)
	if n > L {
		r.RetryAfter = redlimit.Never
	} else {
		// Units leave oldest first: c+n-L of them must go.
		slices.SortStableFunc(live, func(a, b stamp) int { return cmpInt(a.t, b.t) })
		need := c + n - L
		for _, s := range live {
			if need -= s.n; need <= 0 {
				r.RetryAfter = us(s.t + W - now)
				break
			}
		}
	}
	if c > 0 {
		r.ResetAfter = us(newest + W - now)
	}
	return r
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// slidingWindow: the sliding window counter. The estimate at an instant
// is its window's count plus the previous window's, weighted. The weight
// is the part of the previous window still within one period of it. A
// request passes while the estimate plus its cost is at most Count.
// Remaining is what the estimate leaves, rounded down. A request before
// the key's latest window counts at that window's start. The estimate is
// a rational number. It is kept exactly, in units of 1/W, with big
// integers.
func slidingWindow(st *state, l redlimit.Limit, n, now int64) redlimit.Result {
	W, L := l.Period.Microseconds(), l.Count
	w := st.window(l, now)
	start := w * W
	cur, prev := st.windows[w], st.windows[w-1]
	// room is (L - estimate) * W.
	room := func(at int64) *big.Int {
		est := st.estimate(l, at)
		return est.Sub(new(big.Int).Mul(big.NewInt(L), big.NewInt(W)), est)
	}
	fits := func(at int64) bool { // the room covers n
		return room(at).Cmp(new(big.Int).Mul(big.NewInt(n), big.NewInt(W))) >= 0
	}
	units := func(x *big.Int) int64 { // x/W rounded down, at least 0
		q := new(big.Int).Div(x, big.NewInt(W)) // Euclidean: floor for W > 0
		return max(0, q.Int64())
	}
	r := redlimit.Result{Max: L}
	if fits(now) {
		r.Allowed = true
		r.Remaining = units(room(now)) - n
		r.ResetAfter = us(start + 2*W - now) // the current window stops weighing then
		return r
	}
	r.Remaining = units(room(now))
	if n > L {
		r.RetryAfter = redlimit.Never
	} else {
		// The estimate never grows while nothing is admitted, and two
		// windows on it is 0: the first instant it fits is found by
		// bisection.
		lo, hi := now, start+2*W // fits(lo) is false, fits(hi) true
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if fits(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		r.RetryAfter = us(hi - now)
	}
	switch {
	case cur > 0:
		r.ResetAfter = us(start + 2*W - now)
	case prev > 0:
		r.ResetAfter = us(start + W - now)
	}
	return r
}

// estimate returns the sliding window l's estimate at the instant at, times
// the period W: cur*W + prev*(W - elapsed), elapsed being how far into its
// window the request counts.
func (st *state) estimate(l redlimit.Limit, at int64) *big.Int {
	W := l.Period.Microseconds()
	w := st.window(l, at)
	elapsed := max(at, w*W) - w*W
	est := new(big.Int).Mul(big.NewInt(st.windows[w]), big.NewInt(W))
	return est.Add(est, new(big.Int).Mul(big.NewInt(st.windows[w-1]), big.NewInt(W-elapsed)))
}

// tokenBucket: GCRA. Every unit of cost pushes the theoretical arrival
// time (TAT) one emission interval T later. The TAT is never earlier than
// now, and never moved back. A request passes if its TAT stays within the
// tolerance tau = Burst*T of now. Burst units pass at once from idle, and
// a unit is earned back every T.
func tokenBucket(st *state, l redlimit.Limit, n, now int64) redlimit.Result {
	T := l.EmissionInterval()
	tau := l.Burst * T
	tat := max(st.tat, now)
	r := redlimit.Result{Max: l.Burst}
	// A cost above the burst never passes: deciding it first keeps n*T
	// within tau, far from overflowing.
	if n <= l.Burst && tat+n*T-now <= tau {
		next := tat + n*T
		r.Allowed = true
		r.Remaining = (tau - (next - now)) / T
		r.ResetAfter = us(next - now)
		return r
	}
	r.Remaining = max(0, floorDiv(tau-(tat-now), T))
	if n > l.Burst {
		r.RetryAfter = redlimit.Never
	} else {
		r.RetryAfter = us(tat + n*T - now - tau)
	}
	r.ResetAfter = us(tat - now)
	return r
}
