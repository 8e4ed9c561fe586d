// Package redlimit is a rate limiter whose state can live in Redis, so that
// any number of application servers share one count per key, or in process
// memory for a single server and for tests.
//
// A [Limit] says how many requests a key may make per period and which
// algorithm counts them. A [Limiter] decides requests against limits; the
// stores implement it:
//
//   - [github.com/redlimit/redlimit/memory.Store], in process memory;
//   - [github.com/redlimit/redlimit/redisstore.Store], on Redis
//     (standalone, Sentinel or Cluster), with a rueidis or go-redis client.
//
// Both give the same answers to the same calls at the same instants: the
// conformance suite in [github.com/redlimit/redlimit/redlimittest] checks it.
//
//	store, err := memory.New()
//	...
//	res, err := store.AllowN(ctx, "user:42", redlimit.PerMinute(100), 1)
//	if err != nil {
//		return err // the decision could not be made
//	}
//	if !res.Allowed {
//		// deny, and tell the client to come back after res.RetryAfter
//	}
//
// # Limits
//
// Build a limit from a rate with [PerSecond], [PerMinute], [PerHour],
// [PerDay] or [Per], which count with [SlidingWindow], then choose another
// algorithm if needed:
//
//	redlimit.PerSecond(10)                 // 10/1s sliding_window
//	redlimit.PerMinute(100).SlidingLog()   // 100/1m sliding_log
//	redlimit.PerSecond(10).TokenBucket(20) // 10/1s token_bucket burst 20
//
// Limits are plain values and are passed on every call, not configured on the
// store, so one store serves any number of limits. A store keeps state per
// key, algorithm and period ([StateID]): a new Count applies at once to what
// a key has already consumed, a new algorithm or period starts from nothing.
// Periods are whole microseconds from [MinPeriod] to [MaxPeriod]; counts,
// bursts and costs go up to [MaxCount]. [Limit.Validate] reports a limit out
// of range.
//
// # Calendar periods
//
// [PerCalendar] counts a [FixedWindow] per calendar [Day], ISO [Week]
// (from Monday), [Month] or [Year], from midnight in an IANA time zone:
// "1000 per month, reset on the 1st at midnight in Europe/Berlin". A
// window has its true length: 23 or 25 hours on a DST day, 28 to 31 days
// a month. ResetAfter and RetryAfter end at the next midnight that starts
// a period. The store's clock picks the window (Redis's TIME on Redis),
// so hosts with skewed clocks still count in one window.
// Only a fixed window takes a calendar: a sliding window weights the
// previous window by a fixed overlap, a sliding log and a token bucket
// have no windows at all. Validate refuses the others with
// [ErrCalendarAlgorithm], and an unknown zone with [ErrUnknownZone].
//
// # Algorithms
//
// The four algorithms trade accuracy against memory per key. The two window
// algorithms align their windows to the Unix epoch, so a [PerDay] window
// starts at midnight UTC.
//
//   - [SlidingWindow], the sliding window counter (the default): two
//     counters per key. The estimate of the last period is the current
//     window's count plus the previous window's count weighted by how much of
//     the period it still covers. It is exact while the previous window was
//     empty. Otherwise it assumes the previous window's requests were spread
//     evenly; in the worst case, when they were bunched at its end, nearly
//     twice Count can pass in an interval of one period. Remaining and
//     RetryAfter are computed from the weighted estimate. Pick it for most
//     limits, and for high counts.
//   - [SlidingLog]: the admitted cost of every instant over the last
//     period. Exact: never more than Count in any interval of one period.
//     Memory grows with the number of instants at which requests were
//     admitted in the last period, up to Count (16 bytes each in process
//     memory, a sorted-set member in Redis), not with their cost; a
//     request costs O(log n) work whatever its cost. Pick it when a small
//     count must hold exactly: logins, password resets, costly operations.
//   - [FixedWindow]: one counter per key and window. The cheapest and the
//     easiest to explain ("100 per calendar minute"), with a full reset at
//     each boundary; up to twice Count can pass across a boundary.
//   - [TokenBucket], GCRA: one timestamp per key. Exact. Count tokens are
//     added per Period, spaced evenly, and at most Burst are held, so a quiet
//     key may send Burst requests at once and then one every Period/Count.
//     Pick it for smooth rates that allow short bursts.
//
// # Deciding
//
// [Limiter.AllowN] decides one request of cost n and consumes n if it is
// allowed; a denied request consumes nothing. [Limiter.Peek] answers the same
// question without consuming. [Limiter.Reset] gives a key its full allowance
// back. The stores also have Allow, AllowN with a cost of 1.
//
// A denial is a [Result], never an error: Allowed is false, and RetryAfter
// says how long until a request of the same cost could pass, if nothing else
// is admitted meanwhile. A cost above [Limit.Max] can never pass, and its
// RetryAfter is [Never]. Remaining and ResetAfter feed response headers such
// as X-RateLimit-Remaining.
//
// An error means no decision was made: bad input, a closed store, Redis
// unreachable or a deadline passed. The caller decides whether to fail open
// or closed.
//
// [Result.Denied] reports whether the limit itself denied: not allowed, and
// not [Undecided].
//
// # Failure policy and source
//
// [Limit.Failure], [Result.Source] and [Undecided] live here, not in
// package resilient. A limit is passed on every call, so its failure
// policy travels with it: a rule file sets it per rule, and no wrapper
// holds per-limit settings. Source is read by every caller of any
// [Limiter] (metrics, the rate limit service, reserve), whether or not a
// resilient limiter sits below. [Undecided] is set by a store, the Redis
// store on Cluster, not by resilient. Stores ignore Failure and answer
// [FromStore] or [Undecided].
//
// # Concurrency limits
//
// A [Concurrency] limit holds at most Slots leases on a key at once, each
// living TTL unless renewed: "at most 10 jobs in flight per tenant across
// all servers". A [Semaphore] (the Redis and memory stores, and a
// resilient Limiter on one of them) takes, renews and frees leases.
// A holder that dies frees its slot at the TTL. [Hold] holds a slot for a
// task of any length, renewing it, and frees it when the task ends; the
// in-flight rules of httplimit and grpclimit use it. Its renewals record
// a lease the store lost again ([RecordLease]), whatever the key holds. [Concurrency.Failure]
// is the failure policy of a limit, read by resilient as for rate limits.
//
// # Errors
//
// Errors wrap the sentinel errors of this package ([ErrInvalidKey],
// [ErrInvalidCost], [ErrInvalidLimit], [ErrUnknownAlgorithm],
// [ErrInvalidBurst], [ErrDuplicateLimit], [ErrNoRequests], [ErrBadReply],
// [ErrClosed]) with context, so test them with [errors.Is]:
//
//	if errors.Is(err, redlimit.ErrInvalidLimit) { ... }
//
// Errors from the Redis client are wrapped with %w as well, so the client
// library's own errors can be tested for the same way.
//
// # Several limits in one decision
//
// A request often answers to several limits at once: per client IP, per
// user, per API key. [Limiter.AllowAll] decides up to [MaxRequests] of them
// as one: the request passes only if every limit allows it, and if any
// denies, none is consumed. Each [Request] names a key, a limit and a cost;
// two requests may not share state (the same key, algorithm and period,
// [ErrDuplicateLimit]).
//
// The [Decision] holds one Result per request, in order. [Decision.RetryAfter]
// is the longest wait among the limits that denied, and [Decision.Tightest]
// picks the result to report in headers: the worst denial, or the limit with
// the least remaining relative to its size. [Tightest] and [RetryAfter] do
// the same for any results.
//
//	d, err := store.AllowAll(ctx, []redlimit.Request{
//		{Key: "ip:" + ip, Limit: redlimit.PerSecond(5), Cost: 1},
//		{Key: "key:" + apiKey, Limit: redlimit.PerMinute(100).SlidingLog(), Cost: 1},
//	})
//
// The memory store decides every limit atomically; so does Redis on one
// server. On Redis Cluster, see redisstore's Store.AllowAll.
//
// # Waiting
//
// [Wait] blocks until a request is admitted, its wait would pass a
// maximum, or its context ends: x/time/rate's Wait for limits many
// processes share. What it does depends on the algorithm:
//
//   - [TokenBucket] on a [Queuer] (the memory and Redis stores): the
//     request takes its turn atomically ([Queuer.Queue]). The bucket's
//     arrival time moves on by its cost even into the future, as GCRA
//     allows, so waiters are admitted in order, spaced at the rate, with
//     no polling. A turn beyond the maximum wait is refused at once, with
//     its RetryAfter, and takes nothing. A waiter whose context ends
//     gives its turn back ([Queuer.Unqueue]): all of it if no turn was
//     taken after it, else none (the strict side).
//   - The window algorithms, and a token bucket on a Limiter that cannot
//     queue (a resilient.Limiter): retry after each denial's RetryAfter,
//     plus up to a tenth of jitter. Not FIFO: a waiter may be overtaken.
//
// A queued turn holds its place in the state: AllowN and Peek see the
// tokens as taken from the moment it is queued.
//
// # Time
//
// Stores compute in integer microseconds, exactly: every quantity stays
// below 2^53 (what a Lua number on Redis holds exactly) for the bounds
// above and times from the Unix epoch to 2^52 µs, in 2112. A clock outside
// that range reads as the nearest bound, where time stands still: nothing
// expires or refills, so no limit admits more than its count. The memory store
// reads [time.Now] unless given a clock; the Redis store reads the Redis
// server's clock (TIME) unless given one, so application servers whose
// clocks disagree still share one timeline. Injected clocks make tests
// deterministic without sleeping.
//
// A clock can still go back: an injected one, servers whose clocks disagree
// deciding with their own, a server's clock stepped back. A request at an
// instant before what a key has already recorded is decided so that no
// limit admits more than it allows, by the same rule in both stores:
//
//   - [FixedWindow] and [SlidingWindow]: it is counted in the key's latest
//     window, as if made at that window's start (it would otherwise be
//     counted in a window that has ended, and escape the current one);
//   - [SlidingLog]: it is decided at, and recorded with, the time of the
//     key's newest entry, so the log's times never go back;
//   - [TokenBucket]: the bucket's theoretical arrival time never goes back;
//     a request at an earlier instant finds fewer tokens than one at a
//     later instant would.
//
// RetryAfter and ResetAfter are always measured from the request's own
// instant, so they can exceed the period after such a step back.
package redlimit
