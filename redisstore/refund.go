package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redlimit/redlimit"
)

// refund gives back what reqs consumed. reqs is a group of requests that
// one script call allowed. results are what it replied, and at the time
// (µs) it decided them at. Results not allowed consumed nothing and are
// skipped. So are debits: they count whatever the decision
// (redlimit.Request.Debit), and a refund never gives one back. The refund
// runs at the store's time (the Redis server's unless WithClock), and no
// earlier than at.
//
// The request's mark, at + ResetAfter, tells the script what each allow
// wrote. It is the end of the window it was counted in (fixed window), or
// of the window after it (sliding window). For a token bucket it is the
// new theoretical arrival time. For a sliding log it is the request's
// entry time plus the period. From it the script takes back exactly the
// request's cost, whatever was decided on the key since:
//   - fixed and sliding window: the cost out of the window's count, if
//     that window is still the key's;
//   - sliding log: the cost out of the entry at the request's time. The
//     later entries' cumulative counts move down, at most 64 of them.
//     With more, nothing is given back, which is strict. An entry a debit
//     merged away since (lua/debit.lua) gives back nothing. An entry
//     others were merged into keeps their units at its time: strict too;
//   - token bucket, the refund of a group after another group denied
//     (back nil): the TAT is set to max(y - cost, now + (y - mark)), y the
//     TAT now (lua/refund.lua). It is exact when nothing came in between.
//     It never gives back more than the request took when only allows
//     came. Other refunds of the key may come in between too, with the
//     bucket idle at an allow since. Then it can give back more: at most
//     the request's cost and what those refunds gave;
//   - token bucket, [Store.Refund] (back not nil): the TAT is lowered by
//     at most back[i] tokens (lua/refund.lua, token_bucket_giveback). It
//     goes as far as the refund record shows that every admission since
//     passes the shift whole. The record is what the request's admission
//     left in the key (recs: its given and epoch, from the 'admit'
//     reply). It never goes below the exact account, whatever came in
//     between. It is exact when nothing came, or only other refunds, or
//     admissions that found the bucket further ahead than the refund.
//
// A bucket that was full at the decision gets its TAT back as the
// decision's time, not the older one it had. A clock that then goes back
// finds it stricter.
//
// A Reset of the key after the decision has given the request's cost back
// already. The reset's tombstone holds a new generation of the key, not
// the one the admission found (recs, lua/refund.lua). So a [Store.Refund]
// gives nothing back, whatever the clocks. So does a request whose mark
// has passed: its state has expired.
//
// back, if not nil, says how much of each request's cost to give back
// (see [Store.Refund]). recs then holds recsPer values per request: what
// Admit's reply gave its Grant (see receipt). A nil back gives back all
// of it. That is the refund of a group right after another group denied.
// It takes no heed of resets and needs no recs.
func (s *Store) refund(ctx context.Context, reqs []redlimit.Request, results []redlimit.Result, at int64, recs, back []int64) error {
	if len(results) != len(reqs) || back != nil && len(recs) != recsPer*len(reqs) {
		return fmt.Errorf("redisstore: refund: %d results and %d records for %d requests", len(results), len(recs), len(reqs))
	}
	kind, op := kindRefund, "refund"
	if back != nil {
		kind, op = kindGiveBack, "give back"
	}
	n := 0
	for i, r := range reqs {
		if results[i].Allowed && !r.Debit && (back == nil || back[i] != 0) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	keys := make([]string, 0, n)
	given := make([]redlimit.Request, 0, n)
	marks := make([]int64, 0, n)
	var rs []int64 // give-back: the records of the requests given back
	for i, r := range reqs {
		if !results[i].Allowed || r.Debit || back != nil && back[i] == 0 {
			continue
		}
		if back != nil {
			r.Cost = back[i]
			rs = append(rs, recs[recsPer*i:recsPer*(i+1)]...)
		}
		keys = append(keys, s.key(hashTag(r.Key), r.Limit))
		given = append(given, r)
		marks = append(marks, at+results[i].ResetAfter.Microseconds())
	}
	w := s.newWire()
	w.refund(kind, at, keys, given, marks, rs)
	rep, err := s.call(ctx, op, &w)
	if err == nil && !rep.ok() {
		err = badReply(op, rep)
	}
	if err != nil {
		return fmt.Errorf("redisstore: refund: %w", err)
	}
	return nil
}

var _ redlimit.Refunder = (*Store)(nil)

// Admit implements [redlimit.Refunder]: it is AllowAll. The Grant records
// the time (µs, on the store's clock) each request was decided at. From
// it Refund finds what its admission wrote. For a token bucket, the Grant
// also records the refund record its admission left in the key. Admit
// gives a token bucket it counts an admission in that record
// (lua/token_bucket.lua). The key then holds "tat given last epoch".
// AllowN and AllowAll never make one, and keep one they find. On Redis
// Cluster, a decision split by hash tag that a group denied refunds the
// groups that allowed, as AllowAll does.
func (s *Store) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if err := redlimit.ValidateRequests(reqs); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	rc := &receipt{at: make([]int64, len(reqs)), recs: make([]int64, recsPer*len(reqs))}
	var d redlimit.Decision
	var err error
	if groups := s.groups(reqs); len(groups) > 1 {
		d, err = s.allowShardedAt(ctx, reqs, groups, rc)
	} else {
		d = redlimit.Decision{Results: make([]redlimit.Result, len(reqs))}
		var t int64
		d.Allowed, t, err = s.admitGroup(ctx, reqs, d.Results, rc.recs)
		for i := range rc.at {
			rc.at[i] = t
		}
	}
	if err != nil {
		return nil, err
	}
	return &redlimit.Grant{Decision: d, Requests: slices.Clone(reqs), Receipt: rc}, nil
}

// receipt is the Receipt of the Store's Grants. It holds the time in µs
// each request was decided at, and recsPer values per request. For a
// token bucket, those are the given and epoch of the refund record its
// admission left in the key (lua/token_bucket.lua); 0 and 0 otherwise.
// Then comes the key's reset generation at the admission (lua/refund.lua).
type receipt struct {
	at, recs []int64
}

// recsPer is how many values of receipt.recs each request has.
const recsPer = 3

// admitGroup is decideGroup for Admit: one entry of kindAdmit, a batch of
// one. It gives each token bucket it counts an admission in a refund
// record. It fills recs with recsPer values per request, as receipt says.
func (s *Store) admitGroup(ctx context.Context, reqs []redlimit.Request, results []redlimit.Result, recs []int64) (allowed bool, at int64, err error) {
	if len(recs) != recsPer*len(reqs) {
		return false, 0, fmt.Errorf("redisstore: admit: %d records for %d limits", len(recs), len(reqs))
	}
	w := s.newWire()
	w.several(kindAdmit, s.keys(reqs), reqs)
	r, err := s.call(ctx, "admit", &w)
	if err != nil {
		return false, 0, err
	}
	v, rv := r.values(4*len(reqs)), r.values(recsPer*len(reqs))
	if !r.ok() {
		return false, 0, badReply("admit", r)
	}
	copy(recs, rv)
	allowed = true
	for i, q := range reqs {
		results[i] = result(q, v[4*i:4*i+4])
		allowed = allowed && results[i].Allowed
	}
	return allowed, r.now, nil
}

// Refund implements [redlimit.Refunder] in one script call per hash tag
// (one on a standalone server). Each gives back what the admissions wrote,
// as refund does above: back[i] units of each request instead of all of
// it. On Redis Cluster the calls are made at once. So a node that fails or
// hangs (until ctx's deadline) costs the other nodes' refunds nothing.
//
// A call that certainly did not run is made again, up to four times
// within ctx. Redis refused it, or no connection could be made (see
// [Store.NotApplied]). A call not known to have run is not made again,
// since it may still run: a timeout, a connection lost after it was sent.
// Either way the Grant is spent. A refund that failed leaves its requests'
// cost consumed: the strict side. A paused node that runs the call later
// gives it back then, once. The error names the requests. For each hash
// tag whose call failed, it wraps [ErrRefund]. It gives the requests'
// indexes, the units not given back, and whether the call may still be
// applied.
func (s *Store) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if err := redlimit.ValidateRefund(g, back); err != nil {
		return fmt.Errorf("redisstore: refund: %w", err)
	}
	rc, ok := g.Receipt.(*receipt)
	if !ok || len(rc.at) != len(g.Requests) || len(rc.recs) != recsPer*len(g.Requests) {
		return fmt.Errorf("redisstore: refund: %w: not made by a redisstore.Store", redlimit.ErrInvalidGrant)
	}
	if !g.Allowed {
		return nil
	}
	groups := s.groups(g.Requests)
	errs := make([]error, len(groups))
	refund := func(n int) {
		idx := groups[n]
		reqs := make([]redlimit.Request, len(idx))
		results := make([]redlimit.Result, len(idx))
		amounts := make([]int64, len(idx))
		recs := make([]int64, recsPer*len(idx))
		var units int64
		for j, i := range idx {
			reqs[j], results[j], amounts[j] = g.Requests[i], g.Results[i], back[i]
			copy(recs[recsPer*j:recsPer*(j+1)], rc.recs[recsPer*i:recsPer*(i+1)])
			if results[j].Allowed && !reqs[j].Debit {
				units += back[i]
			}
		}
		err := retryRefund(ctx, func() error { return s.refund(ctx, reqs, results, rc.at[idx[0]], recs, amounts) })
		if err != nil {
			errs[n] = fmt.Errorf("redisstore: requests %v (%d units) not given back: %w", idx, units, err)
		}
	}
	if len(groups) == 1 {
		refund(0)
		return errs[0]
	}
	var wg sync.WaitGroup
	for n := range groups {
		wg.Go(func() { refund(n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
