package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
)

// opSource yields a run's operations.
type opSource interface {
	next(h hints) (Op, bool)
}

type replay struct {
	ops []Op
	i   int
}

func (r *replay) next(hints) (Op, bool) {
	if r.i >= len(r.ops) {
		return Op{}, false
	}
	r.i++
	return r.ops[r.i-1], true
}

// Run decodes data into a sequence and runs it in env: see [Check].
func Run(env Env, data []byte, opts Options) *Failure {
	g := newGenerator(data, opts.maxOps())
	g.noBack = opts.NoClockBack
	g.noDebits = opts.NoDebits
	return run(env, g.start, g)
}

// Replay runs seq in env.
func Replay(env Env, seq Sequence) *Failure {
	return run(env, seq.Start, &replay{ops: seq.Ops})
}

// stateID identifies a state of a run: its abstract key, and its
// limit's identity as the stores keep it.
type stateID struct {
	key   int
	limit redlimit.StateID
}

// idOf returns the stateID of key under l.
func idOf(key int, l redlimit.Limit) stateID { return stateID{key, l.StateID("")} }

// info is what the run knows of one state.
type info struct {
	limit  redlimit.Limit // the last limit a request used
	latest int64          // the latest instant a request was decided at (µs)
	turn   *redlimit.Turn // the latest turn queued, for an Unqueue
	// turnAdmitted and turnAt are admitted and admitAt before turn;
	// turnStamp is its stamp in hist.
	turnAdmitted bool
	turnAt       int64
	turnStamp    stamp
	// back says the current instant is before latest: the clock went back.
	back bool
	// changed says its count or burst changed while it held admissions
	// (until a reset).
	changed bool
	// admitted says it has admitted since it was made or reset; admitAt is
	// the instant the latest admission counted at (the clock-back rules
	// may count a request later than it was made).
	admitted bool
	admitAt  int64
	// refundAt, if not 0, is where a Split target's refund left a full
	// token bucket's arrival time. It is later than the others have it,
	// until an admission at or after it. split says a request was decided
	// before it since. So the Split targets' state differs from the
	// others', until a reset.
	refundAt int64
	split    bool
	last     int64   // the last Remaining answered
	hist     []stamp // recent admissions at the instants they counted at, for the admission bounds
}

type runner struct {
	env       Env
	model     *Model
	start     time.Time
	now       int64 // µs, the current op's instant
	states    map[stateID]*info
	checked   *checkMark // the Peek that passed, if the last op was one
	lastRetry time.Duration
	lastReset time.Duration
	done      []Op
	trace     []string
	ctx       context.Context
	stopped   bool // a Split target's answers differed from the others' where allowed, and so did its states
	stats     *Stats
}

func run(env Env, start time.Time, src opSource) (f *Failure) {
	r := &runner{
		env: env, start: start, states: make(map[stateID]*info),
		model: New(env.Clock.Now), ctx: context.Background(), stats: env.Stats,
	}
	if r.stats == nil {
		r.stats = new(Stats)
	}
	defer func() {
		if env.Close != nil {
			env.Close(r.touched())
		}
	}()
	for {
		op, ok := src.next(r)
		if !ok || r.stopped {
			return nil
		}
		if f := r.exec(op); f != nil {
			return f
		}
	}
}

func (r *runner) touched() []Touched {
	var out []Touched
	for id, in := range r.states {
		out = append(out, Touched{Key: r.env.Key(id.key), Limit: in.limit})
	}
	return out
}

// hints

func (r *runner) remaining(key int, l redlimit.Limit) int64 {
	if in := r.states[idOf(key, l)]; in != nil {
		return in.last
	}
	return -1
}
func (r *runner) retryAfter() time.Duration { return r.lastRetry }
func (r *runner) resetAfter() time.Duration { return r.lastReset }

func (r *runner) fail(check, format string, args ...any) *Failure {
	return &Failure{
		Check: check,
		Msg:   fmt.Sprintf(format, args...),
		Seq:   Sequence{Start: r.start, Ops: slices.Clone(r.done)},
		Trace: r.trace[max(0, len(r.trace)-30):],
	}
}

func (r *runner) info(q Req) *info {
	id := idOf(q.Key, q.Limit)
	in := r.states[id]
	if in == nil {
		in = &info{limit: q.Limit, last: -1}
		r.states[id] = in
	}
	return in
}

// checkMark is a Peek that passed: its state and instant.
type checkMark struct {
	id stateID
	at int64
}

// setTime moves the clock to the op's instant.
func (r *runner) setTime(at time.Duration) {
	t := r.start.Add(at)
	r.env.Clock.Set(t)
	if r.env.HostClock != nil {
		r.env.HostClock.Set(t.Add(hostSkew(t)))
	}
	r.now = t.UnixMicro()
	for _, in := range r.states {
		in.back = r.now < in.latest
	}
}

// sentinels are the errors a bad request must wrap.
var sentinels = []error{
	redlimit.ErrInvalidCost, redlimit.ErrInvalidLimit, redlimit.ErrInvalidBurst, redlimit.ErrInvalidKey,
	redlimit.ErrUnknownAlgorithm, redlimit.ErrDuplicateLimit, redlimit.ErrNoRequests,
}

// sentinel names the sentinel err wraps: "" for nil, "other" for none.
func sentinel(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other"
}

func (r *runner) requests(op Op) []redlimit.Request {
	reqs := make([]redlimit.Request, len(op.Reqs))
	for i, q := range op.Reqs {
		reqs[i] = redlimit.Request{Key: r.env.Key(q.Key), Limit: q.Limit, Cost: q.Cost, Debit: q.Debit && op.Kind == AllowAll}
	}
	return reqs
}

// expectedErr is the error every store must return for op, from the
// validation the stores document.
func expectedErr(op Op, reqs []redlimit.Request) error {
	if op.Kind == AllowAll {
		return redlimit.ValidateRequests(reqs)
	}
	cost := reqs[0].Cost
	if op.Kind == Reset {
		cost = 1
	}
	return redlimit.ValidateRequest(reqs[0].Key, reqs[0].Limit, cost)
}

// call runs op on one target.
func (r *runner) call(l redlimit.Limiter, op Op, reqs []redlimit.Request) (redlimit.Decision, error) {
	q := reqs[0]
	var res redlimit.Result
	var err error
	switch op.Kind {
	case Allow:
		res, err = l.AllowN(r.ctx, q.Key, q.Limit, q.Cost)
	case Peek:
		res, err = l.Peek(r.ctx, q.Key, q.Limit, q.Cost)
	case Reset:
		if h := r.env.HostClock; h != nil && hostSkew(r.env.Clock.Now()) < 0 {
			// A reset goes on from a host whose windows miss the stores' clock:
			// two years off, past any calendar windows it sends.
			at := h.Now()
			h.Set(at.Add(800 * 24 * time.Hour))
			defer h.Set(at)
		}
		err = l.Reset(r.ctx, q.Key, q.Limit)
		return redlimit.Decision{}, err
	default:
		return l.AllowAll(r.ctx, reqs)
	}
	return redlimit.Decision{Allowed: res.Allowed, Results: []redlimit.Result{res}}, err
}

func (r *runner) exec(op Op) *Failure {
	r.stats.Ops++
	r.done = append(r.done, op)
	r.setTime(op.At)
	checked := r.checked
	r.checked = nil
	if op.Kind == Queue || op.Kind == Unqueue || op.Kind == QueueLong {
		return r.queue(op)
	}
	reqs := r.requests(op)
	want := expectedErr(op, reqs)
	r.skewed(op)
	ds := make([]redlimit.Decision, len(r.env.Targets))
	refused := make([]bool, len(r.env.Targets))
	for i, tg := range r.env.Targets {
		var before uint64
		if tg.Refused != nil {
			before = tg.Refused()
		}
		d, err := r.call(tg.Limiter, op, reqs)
		if want == nil && tg.Full != nil && errors.Is(err, tg.Full) {
			return r.full(op, tg.Name, err, checked)
		}
		if sentinel(err) != sentinel(want) {
			r.trace = append(r.trace, op.describe(r.env.Key))
			return r.fail("error", "%s: %s returned %v, want an error wrapping %q", op.describe(r.env.Key), tg.Name, err, sentinel(want))
		}
		ds[i] = d
		refused[i] = tg.Refused != nil && tg.Refused() != before
	}
	if want != nil {
		r.stats.Refused++
		r.trace = append(r.trace, fmt.Sprintf("%s: refused (%s)", op.describe(r.env.Key), sentinel(want)))
		return nil
	}
	if op.Kind == Reset {
		r.trace = append(r.trace, op.describe(r.env.Key))
		r.reset(op.Reqs[0])
		return nil
	}
	return r.decided(op, ds, refused)
}

// skewed counts op, and traces it, if HostClock is in another calendar
// window than Clock for one of its limits.
func (r *runner) skewed(op Op) {
	if r.env.HostClock == nil {
		return
	}
	t, h := r.env.Clock.Now(), r.env.HostClock.Now()
	for _, q := range op.Reqs {
		if q.Limit.Calendar.IsZero() {
			continue
		}
		if _, e := q.Limit.Calendar.Window(t); !e.Equal(calendarEnd(q.Limit.Calendar, h)) {
			r.stats.Skewed++
			r.trace = append(r.trace, fmt.Sprintf("the hosts' clock %s from the stores', in another %s window", h.Sub(t), q.Limit.Calendar))
			return
		}
	}
}

func calendarEnd(c redlimit.Calendar, t time.Time) time.Time {
	_, e := c.Window(t)
	return e
}

// full checks op, which target name failed with its Full error: op is a
// decision with a debit, and not the lone debit of a check that just
// passed. A check finds room for its own state only: other debits of the
// decision may need more, and the decision fails whole. Nothing was
// counted, so the model stays as it is.
func (r *runner) full(op Op, name string, err error, checked *checkMark) *Failure {
	desc := op.describe(r.env.Key)
	r.trace = append(r.trace, fmt.Sprintf("%s: %v", desc, err))
	var debits []Req
	for _, q := range op.Reqs {
		if isDebit(op, q) {
			debits = append(debits, q)
		}
	}
	if len(debits) == 0 {
		return r.fail("error", "%s: %s returned %v for a decision without a debit", desc, name, err)
	}
	if q := debits[0]; len(debits) == 1 && checked != nil && checked.at == r.now && checked.id == idOf(q.Key, q.Limit) {
		return r.fail("dropped", "%s: %s returned %v for the debit of a check that passed", desc, name, err)
	}
	r.stats.Full++
	return nil
}

// reset: the model forgets the state, as the stores do.
func (r *runner) reset(q Req) {
	in := r.info(q)
	in.latest = max(in.latest, r.now)
	r.model.Forget(r.env.Key(q.Key), q.Limit)
	*in = info{limit: q.Limit, latest: in.latest, back: in.back, last: -1, hist: in.hist[:0]}
}

// decided checks the answers of an Allow, Peek or AllowAll: the stores
// agree, the model agrees, each result holds on its own, admissions stay
// within the limits, and RetryAfter and ResetAfter are honest. refused
// says which targets refused a request for want of room during the op.
func (r *runner) decided(op Op, ds []redlimit.Decision, refused []bool) *Failure {
	desc := op.describe(r.env.Key)
	r.trace = append(r.trace, fmt.Sprintf("%s: %s", desc, fmtDecision(ds[0])))
	for t, d := range ds {
		if len(d.Results) != len(op.Reqs) {
			return r.fail("invariant", "%s: %s answered %d results for %d requests", desc, r.env.Targets[t].Name, len(d.Results), len(op.Reqs))
		}
	}
	infos := make([]*info, len(op.Reqs))
	for i, q := range op.Reqs {
		infos[i] = r.use(q)
	}
	if f := r.agree(desc, ds, infos); f != nil || r.stopped {
		return f
	}
	ref := ds[0]
	refusal := make([]bool, len(op.Reqs)) // ref's results that are refusals
	for i, q := range op.Reqs {
		r.stats.Modelled++
		debit := isDebit(op, q)
		var want redlimit.Result
		if debit {
			r.stats.Debits++
			want = r.model.PeekDebitAt(r.env.Key(q.Key), q.Limit, q.Cost, r.now)
		} else {
			want = r.model.PeekAt(r.env.Key(q.Key), q.Limit, q.Cost, r.now)
		}
		got := ref.Results[i]
		if got == want {
			continue
		}
		// An admission or check the store had no room for; never a debit.
		if refused[0] && want.Allowed && !debit && !got.Allowed {
			refusal[i] = true
			r.stats.Refusals++
			continue
		}
		return r.fail("model", "%s: request %d (%s):\nstores %+v\nmodel  %+v", desc, i, r.flags(infos[i]), got, want)
	}
	for t, d := range ds {
		for i, q := range op.Reqs {
			check := r.invariants
			if t == 0 && refusal[i] {
				check = r.refusalInvariants
			}
			if f := check(desc, i, q, d.Results[i]); f != nil {
				if len(ds) > 1 {
					f.Msg = r.env.Targets[t].Name + ": " + f.Msg
				}
				return f
			}
		}
	}
	allowed := true
	for _, res := range ref.Results {
		allowed = allowed && res.Allowed
	}
	if ref.Allowed != allowed {
		return r.fail("invariant", "%s: decision Allowed=%v, but its results say %v", desc, ref.Allowed, allowed)
	}
	if op.Kind == Peek && ref.Allowed {
		q := op.Reqs[0]
		r.checked = &checkMark{idOf(q.Key, q.Limit), r.now}
	}
	committed := op.Kind != Peek && ref.Allowed
	if len(op.Reqs) > 1 {
		r.stats.AllowAlls++
	}
	for i, q := range op.Reqs {
		res, in := ref.Results[i], infos[i]
		r.count(res, in)
		in.last = res.Remaining
		if !res.Allowed && res.RetryAfter != redlimit.Never {
			r.lastRetry = res.RetryAfter
		}
		if res.ResetAfter > 0 {
			r.lastReset = res.ResetAfter
		}
		switch {
		case isDebit(op, q):
			if f := r.admit(desc, q, in, res.Allowed); f != nil {
				return f
			}
		case committed:
			if f := r.admit(desc, q, in, true); f != nil {
				return f
			}
		case op.Kind == AllowAll && r.refunds(op, ref, i):
			in.refundAt = r.now
		}
	}
	for i, q := range op.Reqs {
		if refusal[i] {
			continue // when room will be found is no promise
		}
		res, in := ref.Results[i], infos[i]
		// The result describes the state as it now is: it was committed (a
		// debit always is), or denied.
		actual := committed || !res.Allowed || isDebit(op, q)
		var own []redlimit.Result // each store's answer, which Peek must repeat
		// A debit that fit answers for the state after it, as an allowed
		// admission does; one that did not, as Peek does then.
		if !committed && op.Kind == AllowAll && (!isDebit(op, q) || !res.Allowed) {
			for _, d := range ds {
				own = append(own, d.Results[i])
			}
		}
		if f := r.honest(desc, i, q, in, res, actual, own); f != nil {
			return f
		}
	}
	return nil
}

// refunds reports whether a Split target's refund of request i of the
// denied AllowAll op leaves a token bucket's arrival time later than the
// other targets have it. d is the op's reference answer. That happens
// when the request is a token bucket that was full, on a key of several
// in op. Every request on its key must have been allowed. Then that key's
// group committed, and refunded.
func (r *runner) refunds(op Op, d redlimit.Decision, i int) bool {
	q := op.Reqs[i]
	if q.Limit.Algorithm != redlimit.TokenBucket || !slices.ContainsFunc(r.env.Targets, func(t Target) bool { return t.Split }) {
		return false
	}
	others := false
	for j, p := range op.Reqs {
		if p.Key == q.Key && !d.Results[j].Allowed {
			return false
		}
		others = others || p.Key != q.Key
	}
	// A full bucket: the allow moved the arrival time from now.
	return others && d.Results[i].ResetAfter == us(q.Cost*q.Limit.EmissionInterval())
}

// use returns q's state, noting a change of its count or burst, and a
// request before a Split target's refund.
func (r *runner) use(q Req) *info {
	in := r.info(q)
	if in.limit.Count != q.Limit.Count || in.limit.Burst != q.Limit.Burst {
		in.changed = in.changed || in.admitted
		if q.Limit.Algorithm == redlimit.TokenBucket {
			in.hist = in.hist[:0] // its bound holds for the admissions under one limit
		}
		in.limit = q.Limit
	}
	if r.now < in.refundAt {
		in.split = true
	}
	in.latest = max(in.latest, r.now)
	return in
}

// agree checks that every store gave the same answer, field by field, but
// a Split target on a state where it may differ.
func (r *runner) agree(desc string, ds []redlimit.Decision, infos []*info) *Failure {
	ref := ds[0]
	for t := 1; t < len(ds); t++ {
		d := ds[t]
		skip := func(i int) bool { return r.env.Targets[t].Split && infos[i].split }
		if d.Allowed != ref.Allowed {
			for i := range infos {
				if skip(i) {
					// The stores' states now differ where the refund left
					// them apart: nothing after this can be compared.
					r.stats.Split++
					r.stopped = true
					return nil
				}
			}
			return r.fail("stores differ", "%s:\n%s %s\n%s %s", desc, r.env.Targets[0].Name, fmtDecision(ref), r.env.Targets[t].Name, fmtDecision(d))
		}
		for i := range d.Results {
			if skip(i) {
				r.stats.Split++
				continue
			}
			if d.Results[i] != ref.Results[i] {
				return r.fail("stores differ", "%s: request %d (%s):\n%s %+v\n%s %+v", desc, i, r.flags(infos[i]),
					r.env.Targets[0].Name, ref.Results[i], r.env.Targets[t].Name, d.Results[i])
			}
		}
	}
	return nil
}

// count adds a result to the stats.
func (r *runner) count(res redlimit.Result, in *info) {
	switch {
	case res.Allowed:
		r.stats.Allowed++
	case res.RetryAfter == redlimit.Never:
		r.stats.Never++
	default:
		r.stats.Denied++
	}
	if in.changed {
		r.stats.Changed++
	}
	if in.back {
		r.stats.Back++
	}
}

// flags describes a state's departures from the plain case.
func (r *runner) flags(in *info) string {
	var s []string
	if in.back {
		s = append(s, "clock stepped back")
	}
	if in.changed {
		s = append(s, "limit changed")
	}
	if in.split {
		s = append(s, "split by a refund")
	}
	if len(s) == 0 {
		return "plain"
	}
	return strings.Join(s, ", ")
}

func fmtDecision(d redlimit.Decision) string {
	if len(d.Results) == 1 {
		return fmtResult(d.Results[0])
	}
	parts := make([]string, len(d.Results))
	for i, r := range d.Results {
		parts[i] = fmtResult(r)
	}
	return fmt.Sprintf("allowed=%v [%s]", d.Allowed, strings.Join(parts, "; "))
}

func fmtResult(r redlimit.Result) string {
	ra := r.RetryAfter.String()
	if r.RetryAfter == redlimit.Never {
		ra = "never"
	}
	return fmt.Sprintf("{ok=%v rem=%d/%d retry=%s reset=%s}", r.Allowed, r.Remaining, r.Max, ra, r.ResetAfter)
}

// isDebit reports whether q of op is a debit: only an AllowAll carries them.
func isDebit(op Op, q Req) bool { return q.Debit && op.Kind == AllowAll }
