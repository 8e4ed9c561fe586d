package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
)

// ErrRefund wraps the error of a refund that failed for good. The handler
// set with [WithRefundErrorHandler] receives it, and [Store.Refund]
// returns it. The error says whether the refund may still have been
// applied, or certainly was not.
var ErrRefund = errors.New("redisstore: refund failed")

// A group's refund is made up to refundAttempts times, all within
// refundTimeout of the denial. The attempts are about refundBackoff, 4 and
// 16 times that apart, with up to as much again of jitter.
const (
	refundTimeout  = time.Second
	refundAttempts = 4
	refundBackoff  = 10 * time.Millisecond
)

// WithRefundErrorHandler sets the function told of every refund that failed
// for good (see [Store.AllowAll]). It gets the requests whose cost was
// kept. It gets an error wrapping [ErrRefund] that says whether the refund
// may still have been applied. It is called from a goroutine of the Store,
// possibly after AllowAll returned. Its context has the caller's values
// but no deadline. It must be safe for concurrent use. By default the
// failure is logged at warning level with [slog.Default].
func WithRefundErrorHandler(h func(ctx context.Context, reqs []redlimit.Request, err error)) Option {
	return func(s *Store) error {
		if h == nil {
			return fmt.Errorf("redisstore: WithRefundErrorHandler(nil)")
		}
		s.onRefundError = h
		return nil
	}
}

func logRefundError(ctx context.Context, reqs []redlimit.Request, err error) {
	slog.Default().WarnContext(ctx, "redlimit: refund after a denial failed; the limits that allowed keep its cost until their window passes", "limits", len(reqs), "err", err)
}

// group is the part of a sharded decision that one script call decides: the
// requests whose identifiers have one hash tag.
type group struct {
	idx     []int // the requests' indexes in the caller's slice
	reqs    []redlimit.Request
	results []redlimit.Result
	allowed bool
	at      int64   // the decision's time in µs, from the reply
	recs    []int64 // Admit only: the refund records (see receipt)
	err     error
}

// allowSharded decides reqs in the groups idxs, each atomically by one
// script call, all at once. If a group denied, the decision is a denial
// with a nil error, whatever the other groups did. If none denied and one
// failed, its error is returned. Either way what the groups that allowed
// consumed is refunded. Each group is refunded as soon as that is known
// (see refundGroup).
//
// Once a group has denied, the answer is known. The other groups, then
// the refunds, are waited for only until halfway from then to ctx's
// deadline. So the denial reaches a caller with a deadline before it, even
// when a node hangs. Whatever still runs then carries on in the
// background. A group that allows later is refunded there.
func (s *Store) allowSharded(ctx context.Context, reqs []redlimit.Request, idxs [][]int) (redlimit.Decision, error) {
	return s.allowShardedAt(ctx, reqs, idxs, nil)
}

// allowShardedAt is allowSharded that, with rc not nil (Admit), decides
// each group as Admit does (admitGroup) and records in rc what a Refund of
// each request needs. The refund after a denial is the same either way.
func (s *Store) allowShardedAt(ctx context.Context, reqs []redlimit.Request, idxs [][]int, rc *receipt) (redlimit.Decision, error) {
	answers := make(chan *group, len(idxs))
	for _, idx := range idxs {
		g := &group{idx: idx, reqs: make([]redlimit.Request, len(idx)), results: make([]redlimit.Result, len(idx))}
		for j, i := range idx {
			g.reqs[j] = reqs[i]
		}
		go func() {
			if rc != nil {
				g.recs = make([]int64, recsPer*len(g.reqs))
				g.allowed, g.at, g.err = s.admitGroup(ctx, g.reqs, g.results, g.recs)
			} else {
				g.allowed, g.at, g.err = s.decideGroup(ctx, g.reqs, g.results)
			}
			answers <- g
		}()
	}

	var (
		answered  []*group
		allowed   []*group // answered and allowed, not refunded yet
		firstErr  error
		denied    bool
		cut       <-chan time.Time
		cutPassed bool
		refunding sync.WaitGroup
		refunds   int
	)
	giveBack := func(gs []*group) {
		for _, g := range gs {
			refunds++
			refunding.Add(1)
			s.bg.Go(func() {
				defer refunding.Done()
				s.refundGroupOrReport(ctx, g)
			})
		}
	}
wait:
	for len(answered) < len(idxs) {
		select {
		case g := <-answers:
			answered = append(answered, g)
			switch {
			case g.err != nil:
				if firstErr == nil {
					firstErr = g.err
				}
			case g.allowed:
				allowed = append(allowed, g)
			case !denied:
				denied = true
				cut = halfwayToDeadline(ctx)
			}
			if denied {
				giveBack(allowed)
				allowed = nil
			}
		case <-cut:
			cutPassed = true
			break wait
		}
	}
	if late := len(idxs) - len(answered); late > 0 {
		s.bg.Go(func() {
			for range late {
				if g := <-answers; g.err == nil && g.allowed {
					s.refundGroupOrReport(ctx, g)
				}
			}
		})
	}
	if firstErr != nil && !denied {
		giveBack(allowed)
		cut = halfwayToDeadline(ctx)
	}
	if refunds > 0 && !cutPassed {
		refunded := make(chan struct{})
		go func() {
			refunding.Wait()
			close(refunded)
		}()
		select {
		case <-refunded:
		case <-cut:
		case <-ctx.Done():
		}
	}
	if firstErr != nil && !denied {
		return redlimit.Decision{}, firstErr
	}

	d := redlimit.Decision{Allowed: !denied, Results: make([]redlimit.Result, len(reqs))}
	for i, r := range reqs {
		d.Results[i] = redlimit.Result{Max: r.Limit.Max(), Source: redlimit.Undecided}
	}
	for _, g := range answered {
		if g.err == nil {
			for j, i := range g.idx {
				d.Results[i] = g.results[j]
				if rc != nil {
					rc.at[i] = g.at
					copy(rc.recs[recsPer*i:recsPer*(i+1)], g.recs[recsPer*j:recsPer*(j+1)])
				}
			}
		}
	}
	return d, nil
}

// halfwayToDeadline returns a channel that receives halfway from now to
// ctx's deadline, or nil (never) if ctx has none.
func halfwayToDeadline(ctx context.Context) <-chan time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) / 2)
}

// refundGroupOrReport refunds g within refundTimeout, and reports a refund
// that failed for good to the Store's handler.
func (s *Store) refundGroupOrReport(ctx context.Context, g *group) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	if err := s.refundGroup(rctx, g); err != nil {
		s.onRefundError(context.WithoutCancel(ctx), g.reqs, err)
	}
}

// refundGroup gives back what g consumed, as retryRefund makes it.
func (s *Store) refundGroup(ctx context.Context, g *group) error {
	return retryRefund(ctx, func() error { return s.refund(ctx, g.reqs, g.results, g.at, nil, nil) })
}

// retryRefund makes refund, one script call that gives back. A refund that
// certainly did not run (see notApplied) is made again, with backoff,
// while ctx lasts: up to refundAttempts times in all. One that may have run
// is not. Running it twice would give back more than was taken, and a
// refund never turns into an admission. The error wraps ErrRefund and says
// which of the two it was.
func retryRefund(ctx context.Context, refund func() error) error {
	wait := refundBackoff
	for attempt := 1; ; attempt++ {
		err := refund()
		switch {
		case err == nil:
			return nil
		case !notApplied(err):
			return fmt.Errorf("%w (it may still be applied; not retried): %w", ErrRefund, err)
		case attempt == refundAttempts:
			return fmt.Errorf("%w: not applied after %d attempts: %w", ErrRefund, attempt, err)
		}
		t := time.NewTimer(wait + rand.N(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: not applied before the deadline, after %d attempts: %w", ErrRefund, attempt, err)
		}
		wait *= 4
	}
}

// notRunReplies are the error replies with which Redis refuses a command
// without running it (the first word of the reply).
var notRunReplies = []string{"BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "MOVED", "ASK", "NOSCRIPT", "NOREPLICAS"}

// notApplied reports whether err shows that a script call did not run. So
// making it again cannot apply it twice. Redis refused it (see
// notRunReplies), or no connection to the node could be made. A timeout or
// a connection lost after the call was sent leaves it unknown: false.
func notApplied(err error) bool {
	var reply string
	var rerr *rueidis.RedisError
	var gerr redis.Error
	var nerr *net.OpError
	switch {
	case errors.As(err, &rerr):
		reply = rerr.Error()
	case errors.As(err, &gerr):
		reply = gerr.Error()
	case errors.As(err, &nerr):
		return nerr.Op == "dial"
	default:
		return errors.Is(err, rueidis.ErrNoSlot) || errors.Is(err, redis.ErrPoolTimeout)
	}
	word, _, _ := strings.Cut(reply, " ")
	for _, w := range notRunReplies {
		if word == w {
			return true
		}
	}
	return false
}
