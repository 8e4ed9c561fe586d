package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

// ErrInvalidID reports an idempotency id that [Store.DebitOnce] does not
// take: empty, longer than [MaxIDLen], or holding a byte other than an
// ASCII letter, digit, '-' or '_'.
var ErrInvalidID = errors.New("redisstore: invalid idempotency id")

// MaxIDLen is the longest idempotency id [Store.DebitOnce] takes.
const MaxIDLen = 64

// minOnceTTL is the shortest time a debit's marker lives (see onceTTL).
const minOnceTTL = time.Minute

// onceTTL returns how long the marker of a debit under l lives: twice its
// period, and at least a minute. The script adds the store's TTL margin.
// resilient's debts send a charge again only within one period of its last
// unit. Such a retry finds the marker of a first try that Redis ran up to
// one more period (or a minute) late. A retry that Redis runs even later
// than that could count twice.
func onceTTL(l redlimit.Limit) time.Duration {
	return max(2*l.Period, minOnceTTL)
}

// DebitOnce counts req as a debit, as [Store.AllowAll] of it alone would.
// [redlimit.Request.Debit] is implied. It counts nothing if a call with
// the same id for the same state (key, algorithm, period) counted it
// already. It reports whether this call counted it. Calls with one id
// must carry one cost. One script call writes the debit and a marker of
// its id. The marker is a key beside the limit's key, with the same hash
// tag, so in the same Cluster slot. It lives twice the limit's period,
// and at least a minute, plus [WithTTLMargin]'s margin. A call with its
// id in that time counts nothing. A debit whose call failed, not known
// to have run (a timeout, a reply lost with its connection) can thus
// be sent again with its id. It is counted once.
//
// The Result is the debit's (see [redlimit.Request.Debit]) when this call
// counted it, and otherwise what [Store.Peek] of the same cost says.
// [Store.NotApplied] tells, from its error, that the call did not run.
func (s *Store) DebitOnce(ctx context.Context, req redlimit.Request, id string) (res redlimit.Result, counted bool, err error) {
	if err := redlimit.ValidateRequest(req.Key, req.Limit, req.Cost); err != nil {
		return redlimit.Result{}, false, fmt.Errorf("redisstore: %w", err)
	}
	if err := validID(id); err != nil {
		return redlimit.Result{}, false, err
	}
	req.Debit = true
	key := s.key(hashTag(req.Key), req.Limit)
	w := s.newWire()
	w.once(key, key+":once:"+id, req, onceTTL(req.Limit).Microseconds())
	r, err := s.call(ctx, "once", &w)
	if err != nil {
		return redlimit.Result{}, false, err
	}
	v := r.values(5)
	if !r.ok() {
		return redlimit.Result{}, false, badReply("once", r)
	}
	return result(req, v[1:]), v[0] == 1, nil
}

// validID returns an error wrapping ErrInvalidID unless id is one that
// DebitOnce takes.
func validID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidID, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: byte %d is %q", ErrInvalidID, i, c)
		}
	}
	return nil
}
