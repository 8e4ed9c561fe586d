// Package reserve admits work whose cost is known only once it is done.
// Examples are a call to a language model whose tokens are counted in its
// answer, or a download whose bytes are known at its end. A [Ledger]
// reserves an estimate of the cost before the work. That is an admission:
// denied, consuming nothing, if the estimate does not fit. The
// [Reservation] is settled with the real cost afterwards. The difference
// is given back, or debited.
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
// back ([redlimit.Refunder.Refund]). That is exact while nothing else
// happened on the key, and never more than was reserved. Nothing is given
// back once the reservation's window has passed or its key was Reset.
// Above the estimate, Settle debits the difference
// ([redlimit.Request.Debit]). Work done is counted whatever the limit
// says. It may take the key into debt. Later reservations are then denied
// until the debt has drained. Equal, it does nothing.
//
// A real cost no request can count still settles the reservation. So the
// work is counted, and a deferred Release does not give it back. A cost
// above [redlimit.MaxCost] counts as MaxCost: a model answer longer than
// any budget, a caller's bug. MaxCost is the most one request counts and
// the most debt a key carries. The error then wraps [ErrCostClamped]. A
// negative cost says nothing of the work, and the estimate is kept. The
// error then wraps [redlimit.ErrInvalidCost].
//
// [Reservation.Release] gives the whole estimate back, for work that did
// not happen. A reservation is settled or released once. A second Settle
// returns [ErrSettled]. A Release after a Settle does nothing, so
//
//	defer r.Release(ctx)
//
// right after Reserve releases the reservation on every path that does not
// settle it (an error, a panic).
//
// A store that fails while settling leaves the part it could not give back
// consumed: the strict side. It is never given back twice. The
// reservation is settled all the same. So a second Settle returns
// [ErrSettled], and the timeout gives nothing back. On Redis Cluster a
// reservation over several identifiers is given back by one call per
// identifier, all at once. The error wraps redisstore.ErrRefund. It names
// each request not given back, its units, and whether its call may still
// be applied. A node that was paused applies it once when it resumes. A
// refund Redis refused is made again a few times within
// [Options.CallTimeout] before it is reported. The debit of a cost above
// the estimate is one decision over the nodes. An error wrapping
// [ErrNotDebited] names the requests whose node failed. That work is not
// counted. Only the caller can count it again (with [redlimit.Debit]).
//
// Settle and Release are safe for concurrent use. Neither heeds ctx's
// cancellation or deadline, only its values. The cost of work done must be
// counted even when the client has gone away. They take at most
// [Options.CallTimeout].
//
// # Reservations never settled
//
// A reservation neither settled nor released within [Options.Timeout] is
// released by the Ledger. One goroutine keeps the pending reservations in
// a heap by deadline. A Settle after that waits for that release, within
// CallTimeout. It debits the whole real cost and returns an error wrapping
// [ErrExpired]. The cost is counted once: a second Settle returns
// [ErrSettled]. The caller learns its Timeout is shorter than its work.
// The Ledger gives expired reservations back one at a time. A reservation
// past its deadline may not have had its turn yet. Its holder then settles
// (or releases) it as a pending one, and the Ledger skips it. So no Settle
// waits for the releases of others. A Settle racing the release ends the
// same either way: the key has counted the real cost. Choose a Timeout
// longer than the longest work. A release gives back budget for work that
// may still be running.
//
// At most [Options.MaxPending] reservations are pending at once. Beyond
// that, Reserve fails with [ErrTooManyPending] and consumes nothing. That
// bounds the Ledger's memory whatever the load. It is safer than making
// room by dropping older reservations. Releasing one early gives back
// budget for work still running: a flood of reservations would let the
// limit be exceeded. Forgetting one would make its Settle miss its debit.
//
// # Process exit and Close
//
// Reservations live in the process that made them. If it dies, the pending
// ones stay consumed in the store until their windows pass. It is as if
// their work had cost the whole estimate: the conservative side.
// [Ledger.Close] stops the goroutine that releases expired reservations.
// It refuses new ones ([redlimit.ErrClosed]). The pending ones stay
// consumed unless their holders settle or release them. That still works
// after Close, while the store is open. A graceful shutdown waits for its
// in-flight work to settle before closing the store.
//
// # Behind HTTP
//
// Reserve in the middleware, before the handler, and settle when the
// response is done. The middleware denies with 429 and Retry-After when
// the reservation is not OK. It puts the Reservation in the request's
// context for the handler. It releases it after the handler returns. That
// does nothing if the handler settled it. The handler settles with the
// real cost once it knows it: the usage an upstream model reports. For a
// streamed response, it settles after the last byte is written. See the
// package's Example.
package reserve
