// Package reserve admits work whose cost is known only once it is done: a
// call to a language model whose tokens are counted in its answer, a
// download whose bytes are known at its end. A [Ledger] reserves an
// estimate of the cost before the work (an admission: denied, consuming
// nothing, if the estimate does not fit), and the [Reservation] is settled
// with the real cost afterwards: the difference is given back, or debited.
//
//	ledger, err := reserve.New(store, reserve.Options{Timeout: 2 * time.Minute})
//	...
//	r, err := ledger.Reserve(ctx, "user:"+id, redlimit.PerMinute(10_000), estimate)
//	if err != nil {
//		return err // no decision: the store failed, or too many reservations
//	}
//	if !r.OK() {
//		// deny: come back after r.RetryAfter()
//	}
//	used := callModel(...)
//	err = r.Settle(ctx, used)
//
// The store is a [redlimit.Refunder]: memory.Store, redisstore.Store or
// resilient.Limiter.
//
// # Settling
//
// [Reservation.Settle] with a cost below the estimate gives the difference
// back ([redlimit.Refunder.Refund]: exact while nothing else happened on the
// key; never more than was reserved; nothing once the reservation's window
// has passed or its key was Reset). Above the estimate, it debits the
// difference ([redlimit.Request.Debit]): work done is counted whatever the
// limit says, and may take the key into debt, so that later reservations
// are denied until the debt has drained. Equal, it does nothing.
//
// A real cost no request can count still settles the reservation, so that
// the work is counted and a deferred Release does not give it back: above
// [redlimit.MaxCost] (a model answer longer than any budget, a caller's
// bug) it counts as MaxCost, the most one request counts and the most
// debt a key carries, and the error wraps [ErrCostClamped]; a negative
// cost says nothing of the work, and the estimate is kept (the error wraps
// [redlimit.ErrInvalidCost]).
//
// [Reservation.Release] gives the whole estimate back, for work that did
// not happen. A reservation is settled or released once: a second Settle
// returns [ErrSettled]; a Release after a Settle does nothing, so
//
//	defer r.Release(ctx)
//
// right after Reserve releases the reservation on every path that does not
// settle it (an error, a panic).
//
// A store that fails while settling leaves the part it could not give back
// consumed (the strict side), never given back twice: the reservation is
// settled all the same, so a second Settle returns [ErrSettled] and the
// timeout gives nothing back. On Redis Cluster a reservation over several
// identifiers is given back by one call per identifier, all at once; the
// error (wrapping redisstore.ErrRefund) names each request not given back,
// its units, and whether its call may still be applied (a node that was
// paused applies it once when it resumes). A refund Redis refused is made
// again a few times within [Options.CallTimeout] before it is reported.
// The debit of a cost above the estimate is one decision over the nodes;
// requests whose node failed are named by an error wrapping
// [ErrNotDebited]: that work is not counted, and only the caller can
// count it again (with [redlimit.Debit]).
//
// Settle and Release are safe for concurrent use, and
// neither heeds ctx's cancellation or deadline (only its values): the cost
// of work done must be counted even when the client has gone away. They
// take at most [Options.CallTimeout].
//
// # Reservations never settled
//
// A reservation neither settled nor released within [Options.Timeout] is
// released by the Ledger: one goroutine keeps the pending reservations in a
// heap by deadline. A Settle after that waits for that release (within
// CallTimeout), debits the whole real cost and returns an error wrapping
// [ErrExpired]: the cost is counted (once: a second Settle returns
// [ErrSettled]), and the caller learns its Timeout is shorter than its
// work. The Ledger gives expired reservations back one at a time; one past
// its deadline whose turn has not come is settled (or released) by its
// holder as a pending one is, and the Ledger skips it, so no Settle waits
// for the releases of others. A Settle racing the release
// ends the same either way: the key has counted the real cost. Choose a Timeout
// longer than the longest work, since a release gives back budget for work
// that may still be running.
//
// At most [Options.MaxPending] reservations are pending at once; beyond
// that, Reserve fails with [ErrTooManyPending] and consumes nothing. That
// bounds the Ledger's memory whatever the load, and is safer than making
// room by dropping older reservations: releasing one early gives back
// budget for work still running (a flood of reservations would let the
// limit be exceeded), and forgetting one would make its Settle miss its
// debit.
//
// # Process exit and Close
//
// Reservations live in the process that made them. If it dies, the pending
// ones stay consumed in the store until their windows pass, as if their
// work had cost the whole estimate: the conservative side. [Ledger.Close]
// stops the goroutine that releases expired reservations and refuses new
// ones ([redlimit.ErrClosed]); the pending ones stay consumed unless their
// holders settle or release them, which still works after Close (while the
// store is open). A graceful shutdown waits for its in-flight work to
// settle before closing the store.
//
// # Behind HTTP
//
// Reserve in the middleware, before the handler, and settle when the
// response is done: the middleware denies with 429 and Retry-After when
// the reservation is not OK, puts the Reservation in the request's context
// for the handler, and releases it after the handler returns, which does
// nothing if the handler settled it. The handler settles with the real cost
// once it knows it (the usage an upstream model reports), or, for a
// streamed response, after the last byte is written. See the package's
// Example.
package reserve
