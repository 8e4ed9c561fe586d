// Package memory is a [redlimit.Limiter] in process memory. It serves a
// single server and tests. It is also the reference for the Redis store,
// whose scripts follow its arithmetic step for step. So both give the same
// answers.
//
//	store, err := memory.New()
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	res, err := store.Allow(ctx, "ip:"+ip, redlimit.PerSecond(5))
//
// # Concurrency
//
// A [Store] is safe for concurrent use. A key is found without a lock (in a
// [sync.Map]), and each key has its own lock. So calls for different keys
// never wait for each other. The clock is read with the key's lock held.
// So the decisions for one key see the time go forward in the order they
// are made, unless [WithClock] gives a clock that goes back.
// [Store.AllowAll] locks all its keys, in key order. It checks every limit
// before it commits any, so a decision over several limits is atomic. Once
// a key has been seen, [Store.AllowN] allocates nothing. A call with the
// limit the key was last decided with skips the limit's validation.
//
// # Memory and eviction
//
// The store holds one state per key, algorithm and period. It keeps the
// key's string too. docs/BENCHMARKS.md gives the bytes of each. A
// [redlimit.SlidingLog] state also keeps an entry for every instant (µs)
// that admitted requests over the last period. The entry holds the time
// and the units admitted before it. There are up to Count entries,
// whatever the cost, in a buffer that grows by doubling. Every decision is
// O(log n) in them. Debits ([redlimit.Request.Debit]) keep a log within
// Count entries too, however large or many. A debit merges the oldest
// entry into the next while the later entries hold Count units, up to
// twice. Those entries deny anyway while they live, and outlive it. So
// every answer stays as it was. A token bucket that [Store.Admit] counted
// a request in keeps a refund record too, counted as its state is. A Grant
// holds no pointer to a state. So grants held unrefunded (a
// reserve.Ledger's pending reservations) keep none of the memory of
// evicted states. Their own memory is the caller's.
//
// A state is idle when it no longer holds anything. A [Store.Peek] would
// answer exactly as if it were absent: its window has passed, its log has
// aged out, its bucket is full again. Forgetting an idle state changes no
// answer. A background goroutine removes idle states every
// [DefaultSweepInterval]. [WithSweepInterval] changes that or turns it
// off. [Store.Sweep] does it at once.
//
// Two bounds hold the store. [WithMaxKeys] bounds the states (default
// [DefaultMaxKeys]), and the leases apart. [WithMaxBytes] bounds their
// estimated memory, keys, lease ids and sliding logs' buffers included
// (default [DefaultMaxBytes]). [Store.Acquire] of a new lease past a
// bound is denied. A record of a holder that runs ([redlimit.RecordLease])
// counts beyond, as a debit does. A decision claims the room it needs
// before it commits. So the store never holds more than either bound, but
// for debits (below) and records. A decision
// may make a state, or grow a sliding log's buffer, beyond a bound. The
// store then evicts. It samples up to 64 keys at random, eight at a time.
// It removes their idle states until there is room. A state that is not
// idle is never evicted. So no flood of new keys gives a key back the
// allowance it has used. If the sample finds no room, the request is
// denied. That is a denial, not an error, so a resilient limiter does not
// fail open. Its RetryAfter is when a sampled state becomes idle, at least
// a millisecond. It is counted in [Stats].Refused. Keys that have their
// state are decided as usual. [Store.Peek] refuses the same way. So a
// check passes only if its request could be counted. A store that refuses
// is too small for its traffic, or under a flood of new keys. A sample can
// also miss idle states when few remain, until the sweeper removes them.
// [Store.Stats] reports the states, bytes and refusals, for metrics.
//
// A debit is never refused: it records work done. A check that had room
// may be followed by its debit after other keys took the room. A full
// store counts it beyond its bounds, by up to an eighth of each (at least
// one state). Past that, the decision fails with [ErrFull] and counts
// nothing. So debits of new keys never grow the store without end. The
// caller sees that its debit was not counted. A check finds room for its
// own state only. A decision that also debits new keys may find none.
//
// # Clock
//
// The store reads the monotonic clock in microseconds, unless [WithClock]
// gives it another clock. That is the wall time at [New] plus the
// monotonic time since. A clock that tests set and advance makes decisions
// deterministic without sleeping;
// [github.com/redlimit/redlimit/redlimittest.Clock] is one, safe for
// concurrent use.
//
// # Close
//
// [Store.Close] stops the sweeper goroutine and waits for it. Calls after
// Close return an error wrapping [redlimit.ErrClosed]; Close itself may be
// called more than once. A store made with WithSweepInterval(0) starts no
// goroutine, but Close is still the way to end its use.
package memory
