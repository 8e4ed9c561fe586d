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
// A [Store] is safe for concurrent use. Its states are spread over 64 shards
// by a seeded hash of the key, each shard with its own lock, so calls for
// unrelated keys rarely wait for each other. [Store.AllowAll] locks the
// shards of all its keys, in a fixed order, and checks every limit before it
// commits any, so a decision over several limits is atomic. Once a key has
// been seen, [Store.AllowN] allocates nothing.
//
// # Memory and eviction
//
// The store holds one state per key, algorithm and period. A state takes
// about a hundred bytes plus the key, except a [redlimit.SlidingLog] state, which keeps the time
// of every admitted unit of cost over the last period: eight bytes each, up
// to Count.
//
// A state expires when it no longer holds anything (its window has passed,
// its log has aged out, its bucket is full again), and an expired state
// behaves as no state. A background goroutine removes expired states every
// [DefaultSweepInterval]; [WithSweepInterval] changes that or turns it off,
// and [Store.Sweep] does it at once.
//
// [WithMaxKeys] bounds the number of states (default [DefaultMaxKeys]),
// divided evenly among the shards, so one shard may start evicting a little
// before the store as a whole is full. When a new state finds its shard full, the
// store samples eight states of that shard and removes those that expired;
// if none had, it removes the sampled state closest to expiring. Eviction
// forgets what a key consumed, so under memory pressure the store errs on the
// permissive side; [Store.Len] tells how full it is.
//
// # Clock
//
// The store reads [time.Now], in microseconds, unless [WithClock] gives it
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
