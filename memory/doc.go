// Package memory is a [redlimit.Limiter] in process memory: for a single
// server, for tests, and as a reference for the Redis store, whose scripts
// follow its arithmetic step for step so that both give the same answers.
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
// [sync.Map]) and each key has its own lock, so calls for different keys
// never wait for each other. The clock is read with the key's lock held, so
// that (unless [WithClock] gives a clock that goes back) the decisions for
// one key see the time go forward in the order they are made.
// [Store.AllowAll] locks all its keys, in key order, and checks every limit
// before it commits any, so a decision over several limits is atomic. Once
// a key has been seen, [Store.AllowN] allocates nothing, and a call with the
// limit the key was last decided with skips the limit's validation.
//
// # Memory and eviction
//
// The store holds one state per key, algorithm and period. A key with one
// state takes about 370 bytes besides the key's string, which the store
// keeps (its slot and map node about 180, the state 192); a
// [redlimit.SlidingLog] state also keeps, for every instant (µs) at which
// it admitted requests over the last period, the time and the units
// admitted before it: 16 bytes each, up to Count, whatever the cost, in a
// buffer that grows by doubling. Every decision is O(log n) in them.
// Debits ([redlimit.Request.Debit]) keep a log within Count entries too,
// however large or many: a debit merges the oldest entry into the next
// while the later entries hold Count units (they deny anyway while they
// live, and outlive it), up to twice, which leaves every answer as it was.
// A token bucket that [Store.Admit] counted a request in keeps a
// refund record too, 24 bytes, counted as its state is. A Grant holds no
// pointer to a state: grants held unrefunded (a reserve.Ledger's pending
// reservations) keep none of the memory of states the store has evicted;
// they are the caller's, about 200 bytes each.
//
// A state is idle when it no longer holds anything: a [Store.Peek] would
// answer exactly as if it were absent (its window has passed, its log has
// aged out, its bucket is full again). Forgetting an idle state changes no
// answer. A background goroutine removes idle states every
// [DefaultSweepInterval]; [WithSweepInterval] changes that or turns it off,
// and [Store.Sweep] does it at once.
//
// Two bounds hold the store: [WithMaxKeys] on states (default
// [DefaultMaxKeys]) and [WithMaxBytes] on their estimated memory, keys and
// sliding logs' buffers included (default [DefaultMaxBytes]). A decision
// claims the room it needs before it commits, so the store never holds
// more than either bound, but for debits (below). When a decision would
// make a state, or grow a sliding log's buffer, beyond a bound, the store
// evicts: it samples up to 64 keys at random, eight at a time, and removes
// their idle states until there is room. A state that is not idle is never
// evicted, so no flood of new keys gives a key back the allowance it has
// used. If the sample finds no room, the request is denied (a denial, not
// an error, so that a resilient limiter does not fail open), with a
// RetryAfter of when a sampled state becomes idle (at least a
// millisecond), and counted in [Stats].Refused; keys that have their state
// are decided as usual. [Store.Peek] refuses the same way, so a check
// passes only if its request could be counted. A store that refuses is too
// small for its traffic, or under a flood of new keys; a sample can also
// miss idle states when few remain, until the sweeper removes them.
// [Store.Stats] reports the states, bytes and refusals, for metrics.
//
// A debit is never refused: it records work done, and a check that had
// room may be followed by its debit after other keys took the room. A
// full store counts it beyond its bounds, by up to an eighth of each (at
// least one state). Past that, the decision fails with [ErrFull] and
// counts nothing, so that debits of new keys never grow the store without
// end; the caller sees that its debit was not counted. A check finds
// room for its own state only: a decision that also debits new keys may
// find none.
//
// # Clock
//
// The store reads the monotonic clock (the wall time at [New] plus the
// monotonic time since), in microseconds, unless [WithClock] gives it
// another clock. A clock that tests set and advance makes decisions
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
