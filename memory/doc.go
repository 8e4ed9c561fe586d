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
// state takes about 280 bytes (128 for the state, the rest for its lock and
// its place in the map) besides the key string, which the store keeps; a
// [redlimit.SlidingLog] state also keeps the time of every admitted unit of
// cost over the last period: eight bytes each, up to Count.
//
// A state expires when it no longer holds anything (its window has passed,
// its log has aged out, its bucket is full again), and an expired state
// behaves as no state. A background goroutine removes expired states every
// [DefaultSweepInterval]; [WithSweepInterval] changes that or turns it off,
// and [Store.Sweep] does it at once.
//
// [WithMaxKeys] bounds the number of states (default [DefaultMaxKeys]). When
// a new state takes the store beyond it, the store samples eight keys that
// hold states and removes those states that expired; if none had, it removes
// the sampled state closest to expiring (and samples again, up to eight
// times, if that removed nothing). Eviction forgets what a key consumed, so
// under memory pressure the store errs on the permissive side; [Store.Len]
// tells how full it is.
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
