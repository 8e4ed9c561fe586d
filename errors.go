package redlimit

import "errors"

// Sentinel errors. Stores wrap them with context, so test with [errors.Is].
var (
	// ErrInvalidKey reports an empty key.
	ErrInvalidKey = errors.New("redlimit: invalid key")
	// ErrInvalidCost reports a cost (n) below 1 or above MaxCost.
	ErrInvalidCost = errors.New("redlimit: invalid cost")
	// ErrInvalidLimit reports a count or period out of range.
	ErrInvalidLimit = errors.New("redlimit: invalid limit")
	// ErrUnknownAlgorithm reports an Algorithm value or name that is not one of the four.
	ErrUnknownAlgorithm = errors.New("redlimit: unknown algorithm")
	// ErrUnknownZone reports a calendar's time zone that does not load.
	ErrUnknownZone = errors.New("redlimit: unknown time zone")
	// ErrCalendarAlgorithm reports a calendar on an algorithm other than
	// FixedWindow: only a fixed window has periods to align.
	ErrCalendarAlgorithm = errors.New("redlimit: calendar periods need fixed_window")
	// ErrInvalidBurst reports a token bucket burst below 1, or one too large for its rate.
	ErrInvalidBurst = errors.New("redlimit: invalid burst")
	// ErrDuplicateLimit reports two requests of one decision that would share state:
	// the same key, algorithm and period.
	ErrDuplicateLimit = errors.New("redlimit: duplicate limit in one decision")
	// ErrNoRequests reports a decision asked for with no requests.
	ErrNoRequests = errors.New("redlimit: no requests")
	// ErrBadReply reports a reply from a backend that does not have the expected shape.
	ErrBadReply = errors.New("redlimit: unexpected reply from backend")
	// ErrKeyState reports a key whose stored state a store cannot use:
	// a Redis key of another type, or state it cannot parse. It fails
	// that key's decisions only; it is not a store outage.
	ErrKeyState = errors.New("redlimit: key holds state the store cannot use")
	// ErrClockSkew reports a calendar decision a store cannot place in a
	// window: its clock and this host's are a window or more apart. It
	// fails those decisions only; it is this host's fault, not an outage.
	ErrClockSkew = errors.New("redlimit: the store's clock is a calendar window or more from this host's")
	// ErrClosed reports a call on a store that has been closed.
	ErrClosed = errors.New("redlimit: store closed")
	// ErrRefunded reports a [Grant] refunded a second time.
	ErrRefunded = errors.New("redlimit: grant already refunded")
	// ErrInvalidWait reports a maximum wait below 0 or above [MaxWait].
	ErrInvalidWait = errors.New("redlimit: invalid wait")
	// ErrQueueAlgorithm reports a [Queuer.Queue] of an algorithm other
	// than TokenBucket: only a bucket has future instants to queue at.
	ErrQueueAlgorithm = errors.New("redlimit: queueing needs token_bucket")
	// ErrInvalidGrant reports a [Grant] that its store did not make.
	ErrInvalidGrant = errors.New("redlimit: invalid grant")
)
