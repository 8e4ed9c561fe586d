package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Refunder = (*Store)(nil)

// wrote is what an admission of an allowed decision wrote. id is the
// entry it was counted in (0: none). mark is the expiry the commit gave
// the entry. That is the end of the window it was counted in, or of the
// next one for a sliding window. For a sliding log it is the entry time
// plus the period. For a token bucket it is the new TAT. For a token
// bucket, given and epoch are its refundable record's then. wrote holds
// no pointer into the store. So a Grant held past its entry's eviction
// keeps none of the store's memory.
type wrote struct {
	id           uint64
	mark         int64
	given, epoch int64
}

// record returns what Refund needs of a request an Admit counted in e at
// now. Its commit gave e the expiry mark. record also returns the bytes it
// added to e. A token bucket's admission gives the bucket a refundable
// record if it has none. The room for it was claimed (sizeAfter).
func record(e *entry, now, mark int64, debit bool) (wrote, int64) {
	w := wrote{id: e.id, mark: mark}
	var made int64
	if e.p.alg == redlimit.TokenBucket && !debit {
		if e.bucket.rec == nil {
			e.bucket.rec = &refundable{last: now}
			made = recordBytes
		}
		w.given, w.epoch = e.bucket.rec.given, e.bucket.rec.epoch
	}
	return w, made
}

// refundable is what a token bucket's refunds need. It is kept from the
// first Admit that counted a request in it. redisstore keeps the same in
// the bucket's key (lua/refund.lua). It holds:
//   - given: the µs that refunds gave back since the epoch began;
//   - last: the latest instant an admission or debit was counted at since
//     the record was made;
//   - epoch: changes when a debit reached the debt bound, or given grew
//     past maxGiven. A refund of a request counted in another epoch gives
//     nothing back.
//
// A refund of k units of a request R of emission interval ei, whose
// admission left the TAT at mark and given at g0, lowers the TAT y by
//
//	b = min(k*ei, mark - (given - g0) - last, y - now)
//
// (nothing when b <= 0). The exact account is the TAT of a replay of the
// same admissions and debits with R costing k*ei µs less. Every earlier
// refund is applied the same way. In the replay, lowering R's cost by b
// lowers the TAT by exactly b. That holds while every admission or debit
// after R still finds the replay's TAT at least b after its own instant.
// An admission at t maps the TAT T to max(T, t) + cost. So a shift passes
// whole while T - b >= t. Below that it shrinks, down to none at an idle
// bucket. Right after R, the replay's TAT is at least mark less what
// refunds of earlier requests gave back since. Each lowers it by what it
// gave, at most given - g0 in all. Admissions only raise it. So before
// each later admission, at t <= last, it is at least
// mark - (given - g0) - last ahead of t. Thus b is a shift that passes
// whole. The bucket is left exactly where the replay with R costing b
// less is, never below the exact account. b = k*ei, the exact account
// itself, in three cases. Nothing came between; or only refunds did. Or
// the admissions between came while the bucket stayed ahead of them by
// more than the refund and the refunds since. A debit that did not fit moves
// the TAT as an admission does, except at the debt bound. There the TAT
// no longer depends on R's cost, so that starts a new epoch.
type refundable struct {
	given, last, epoch int64
}

// maxGiven bounds given, so that the Redis store's copy stays an exact Lua
// number: a refund that takes it past starts a new epoch.
const maxGiven = 1 << 52

// cutBucket starts a new epoch of e's refundable record, if it has one.
// It does so when a debit of n at now that does not fit reaches the debt
// bound (debitUpdate). The debit then writes a TAT that a smaller cost before
// it would not have changed, or none.
func cutBucket(e *entry, p *params, now, n int64) {
	if p.alg != redlimit.TokenBucket || e == nil || e.bucket.rec == nil {
		return
	}
	var d int64
	if now < e.expires && e.bucket.tat > now {
		d = e.bucket.tat - now
	}
	if bound := min(p.tau+maxPeriodMicros, maxTAT-now); d >= bound || n > (bound-d)/p.ei {
		r := e.bucket.rec
		r.epoch, r.given, r.last = r.epoch+1, 0, max(r.last, now)
	}
}

// Admit implements [redlimit.Refunder]: it is AllowAll, and the Grant of an
// allowed decision records the entry each request was counted in.
func (s *Store) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	w := make([]wrote, len(reqs))
	d, err := s.allowAll(ctx, reqs, w)
	if err != nil {
		return nil, err
	}
	return &redlimit.Grant{Decision: d, Requests: slices.Clone(reqs), Receipt: w}, nil
}

// Refund implements [redlimit.Refunder]. An admission is given back only
// from the entry it was counted in, found by its id. A Reset drops the
// entry; an eviction drops only idle entries. Either since the decision
// leaves nothing to give back. From that entry:
//   - fixed and sliding window: back[i] out of the count of the window the
//     request was counted in. The key must still count that window, or
//     keep it retired (see entry.retired), and it must hold that much. A
//     latest window it empties is deleted. The windows its making retired
//     come back (restore), as the Redis store does. So the key is as if
//     the request never came, for a clock that goes back too;
//   - sliding log: back[i] out of the log entry at the request's time. It
//     must hold that much, and at most 64 entries may follow it, as on
//     Redis. The later entries' counts stay. An entry emptied is removed;
//   - token bucket: the TAT lowered as refundable says. It is exactly
//     back[i] when nothing came in between, or only other refunds, or
//     admissions that found the bucket more than that ahead. Otherwise it
//     is less, down to nothing, never below the exact account.
func (s *Store) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if err := redlimit.ValidateRefund(g, back); err != nil {
		return fmt.Errorf("memory: refund: %w", err)
	}
	w, ok := g.Receipt.([]wrote)
	if !ok || len(w) != len(g.Requests) {
		return fmt.Errorf("memory: refund: %w: not made by a memory store", redlimit.ErrInvalidGrant)
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	if !g.Allowed {
		return nil
	}
	for i, r := range g.Requests {
		if back[i] == 0 || w[i].id == 0 {
			continue
		}
		v, ok := s.keys.Load(r.Key)
		if !ok {
			continue
		}
		sl := v.(*slot)
		sl.mu.Lock()
		if e := sl.find(r.Limit.Algorithm, r.Limit.Period, r.Limit.Calendar); !sl.dead && e != nil && e.id == w[i].id {
			giveBack(e, s.micros(), back[i], w[i], r.Limit)
		}
		sl.mu.Unlock()
	}
	return nil
}

// giveBack takes k units of a request of limit l whose commit wrote w out
// of e, at now, as Refund says.
func giveBack(e *entry, now, k int64, w wrote, l redlimit.Limit) {
	mark := w.mark
	if now >= e.expires || now >= mark {
		return // the request's state has expired
	}
	W := e.p.window
	switch e.p.alg {
	case redlimit.FixedWindow:
		v, ws, r := mark/W-1, &e.windows, &e.retired
		if !e.p.cal.IsZero() {
			v = mark // a calendar window is named by its end
		}
		switch {
		case ws.index == v:
			if ws.count >= k {
				if ws.count -= k; ws.count == 0 {
					e.restore(W)
				}
			}
		case r.index == v && r.count >= k:
			r.count -= k // a retired window's
		}
	case redlimit.SlidingWindow:
		v, ws, r := mark/W-2, &e.windows, &e.retired
		switch {
		case ws.index == v:
			if ws.count >= k {
				if ws.count -= k; ws.count == 0 {
					e.restore(W)
				}
			}
		case ws.index == v+1:
			if ws.prev >= k {
				ws.prev -= k
			}
		case r.index == v && r.index < ws.index-1:
			if r.count >= k {
				r.count -= k // a retired window's
			}
		case r.index-1 == v && r.prev >= k:
			r.prev -= k // a retired window's
		}
	case redlimit.SlidingLog:
		e.log.take(mark-W, k)
	default:
		r, y := e.bucket.rec, e.bucket.tat
		if r == nil || r.epoch != w.epoch {
			return
		}
		// k <= the request's cost <= its burst, so k*ei <= its tau.
		b := min(k*l.EmissionInterval(), mark-(r.given-w.given)-r.last, y-now)
		if b <= 0 {
			return
		}
		e.bucket.tat -= b
		if r.given += b; r.given > maxGiven {
			r.epoch, r.given = r.epoch+1, 0
		}
	}
}

// logRefundMost is the most entries after a refunded one that a sliding
// log's refund rewrites. Beyond, it gives nothing back, as the Redis
// store does (LOG_REFUND in lua/refund.lua). So a refund's work stays
// bounded.
const logRefundMost = 64

// take removes k units from the entry at time t, if it holds that many and
// at most logRefundMost entries follow it; the later entries keep theirs.
// An entry left empty is removed, as the Redis store removes it: it would
// hold a time but no unit.
func (r *ring) take(t, k int64) {
	i := r.firstAfter(t - 1)
	if i == r.n || r.at(i).at != t || int64(r.cumAfter(i)-r.at(i).cum) < k || r.n-1-i > logRefundMost {
		return
	}
	for j := i + 1; j < r.n; j++ {
		r.at(j).cum -= uint64(k)
	}
	r.total -= uint64(k)
	if r.cumAfter(i) != r.at(i).cum {
		return
	}
	for j := i; j < r.n-1; j++ {
		*r.at(j) = *r.at(j + 1)
	}
	r.n--
}

// restore runs after a refund emptied e's latest window. As the Redis
// scripts do (windows_refund, lua/refund.lua), the window is deleted. The
// windows its making retired come back. So the key is as if the request
// never came. The live windows left then hold nonzero counts. For a
// sliding window, one is the window before the emptied one (its count is
// prev). The others are the retired ones: the latest before it, and the
// one before that. For a sliding window, the latest retired one may be the
// window before the emptied one, which stayed live. The latest of them
// becomes the key's latest window. With none, e holds no state.
func (e *entry) restore(W int64) {
	ws, r := e.windows, e.retired
	e.retired = windowState{}
	type field struct{ index, count int64 }
	var fs [3]field
	fs[0] = field{ws.index - 1, ws.prev} // 0 for a fixed window
	fs[1] = field{r.index - 1, r.prev}
	if e.p.alg == redlimit.FixedWindow || r.index != ws.index-1 {
		fs[2] = field{r.index, r.count}
	}
	var latest field
	for _, f := range fs {
		if f.count > 0 && (latest.count == 0 || f.index > latest.index) {
			latest = f
		}
	}
	if latest.count == 0 {
		e.windows, e.expires = windowState{}, 0
		return
	}
	e.windows = windowState{index: latest.index, count: latest.count}
	if e.p.alg == redlimit.FixedWindow {
		e.expires = e.p.fixedEnd(latest.index)
		return
	}
	for _, f := range fs {
		if f.count > 0 && f.index == latest.index-1 {
			e.windows.prev = f.count
		}
	}
	e.expires = latest.index*W + 2*W
}
