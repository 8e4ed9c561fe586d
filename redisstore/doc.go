// Package redisstore is a [redlimit.Limiter] on Redis. Any number of
// application servers share one count per key.
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	...
//	store, err := redisstore.New(client)
//	...
//	res, err := store.AllowN(ctx, "user:42", redlimit.PerMinute(100), 1)
//
// # Clients
//
// [New] takes a rueidis client: standalone, Sentinel or Cluster. It
// auto-pipelines concurrent decisions. [NewGoRedis] takes a go-redis
// [redis.UniversalClient] the application already has. That is a
// *redis.Client (standalone or failover), a *redis.ClusterClient or a
// *redis.Ring. The
// caller owns the client and closes it, after [Store.Close]. Close waits
// for the refunds still running and ends the goroutines that send batches.
// A Store from [Open] owns its client, and its Close closes it.
//
// Redis 6.2 and later are supported; the tests run on Redis 7.0, standalone
// and as a Cluster, through both client libraries.
//
// # One script per decision
//
// Every call is one run of one Lua script. So a decision reads and writes
// its keys without any other client's commands in between, however many
// application servers share them. The scripts are kept in .lua files
// under lua/, embedded with go:embed and joined once at start-up. Every
// decision reaches Redis one way: as an entry of the batch script
// (lua/batch.lua). An entry is an allow or peek of one limit, a decision
// of several limits, an Admit, a Reset, a refund or a debit counted once.
// A lone call is a batch of one. wire.go encodes the entries and reads the
// reply, in the order the script reads them. Each algorithm's arithmetic
// is written once, in its file, as functions every entry calls. A lone
// decision of one limit takes a branch of the script that makes only its
// algorithm's functions. It gets the same answers. The arithmetic follows
// the memory store's operation for operation, so the stores agree.
//
// Scripts are sent by their SHA1 with EVALSHA. They are sent in full with
// EVAL only when a server answers NOSCRIPT: after a restart, a failover or
// SCRIPT FLUSH. EVAL loads them there for later calls. The reply is an
// array of integers whose shape is checked. Anything else is an error
// wrapping [redlimit.ErrBadReply], never a panic. Peek writes nothing.
//
// # Batching
//
// Decisions (AllowN, Peek, AllowAll; not Admit) bound for one server may
// arrive while a call to it is in flight. They go together in the next
// call. It decides them one after another in arrival order, at one
// instant. Each gets the answer a call of its own would get at that
// instant. Single-limit decisions on one key read and write the key once.
// Identical ones (a hot key's: one key, limit and cost) are sent once with
// their number. They are decided as two requests, the first and the rest.
// A caller that finds nothing in flight is sent at once. The next call
// goes when the one in flight answers. Or it goes beside it, once half the
// decisions in play wait; two calls are in flight at most. See
// [WithBatching].
//
// Each decision in a batch succeeds or fails alone. A key of another type
// (WRONGTYPE), or state the script cannot parse, fails its own decision
// with [redlimit.ErrKeyState], batched or not, and writes nothing for it.
//
// On Redis Cluster (7 or later) a batch takes the decisions of one node,
// whatever their slots. It is one call sent to that node with the keys in
// ARGV (the allow-cross-slot-keys script flag). The script reads every key
// before it writes any. A node may not serve one of them: its slot moved.
// The node then refuses the whole batch, which is decided again slot by
// slot. The Store keeps which node serves which slot. It learns it from
// the client's view or CLUSTER SLOTS, refreshed every few seconds and
// after such a refusal. See [WithNodeBatches]. pernode.go says why this is
// safe while slots move and nodes fail over.
//
// # Time
//
// By default the script reads the Redis server's clock (TIME). So
// application servers whose clocks disagree still share one timeline.
// [WithClock] makes the store pass the time to the script instead: for
// tests, or to decide at a chosen instant. Times are integer microseconds,
// from the Unix epoch to 2^52 µs (in 2112). There the scripts' arithmetic
// is exact. A time outside, given or read from TIME, reads as the nearest
// bound, as in the memory store. Key TTLs still run on the server's clock.
// With a clock that stands still or lags behind it, state can expire
// early. A clock that goes back finds state only as long as TTLs kept it
// ([WithTTLMargin]). A request at an instant before what a key has
// recorded is decided by the rules of the redlimit package documentation.
// The memory store does the same.
//
// A calendar limit's windows need time zone data, which Lua lacks. The
// store sends three windows in a row, computed around this host's clock;
// the script counts in the one that holds its own. So hosts up to a day
// apart count in one window, and ResetAfter ends it on Redis's clock. A
// decision whose windows miss Redis's clock fails with [redlimit.ErrClockSkew].
//
// # Keys
//
// The state of a limit lives in one key,
//
//	prefix{identifier}:alg:period
//
// The parts are:
//   - prefix: [DefaultPrefix] ("redlimit:") unless [WithPrefix] sets another;
//   - identifier: the caller's key;
//   - alg: fw, sl, sw or tb (fixed window, sliding log, sliding window,
//     token bucket);
//   - period: the limit's Period in microseconds.
//
// For example, PerSecond(5) for "user:42" keeps its counts in
//
//	redlimit:{user:42}:sw:1000000
//
// The braces make the identifier the key's hash tag. On Redis Cluster every
// key of one identifier, whatever the limit, is in the same slot. An
// identifier must not pick another slot or collide with another
// identifier. So the '%', '{', '}' and '#' in it are percent-escaped. An
// identifier longer than 128 bytes is replaced by '#' and its hex SHA-256.
// The prefix may hold no brace.
//
// What a key holds:
//
//   - fixed and sliding window: a hash from window index to the window's
//     count. The index is the Unix time in microseconds divided by the
//     period, rounded down. The hash holds the key's latest window, and
//     for the sliding window the one before it;
//   - sliding log: a sorted set with a member per instant that admitted
//     requests. A member is scored by the time in microseconds. It is
//     named by the units admitted on the key up to it (modulo 2^53). A
//     base member "b" scored -inf comes first. The count of the last
//     period is the newest member less the one before the first live
//     entry. It is found in O(log n) whatever the costs;
//   - token bucket: the theoretical arrival time, in microseconds. Once
//     [Store.Admit] (the reserve package) has counted a request in it, it
//     holds "tat given last epoch". That is the TAT and the record its
//     refunds need (lua/token_bucket.lua). Every later call keeps the
//     record until the key expires or is reset. AllowN, AllowAll and Peek
//     never make a record. Versions without the record fail their
//     decisions on such a key (a script error), until it expires. Only
//     buckets that Admit touched meet that. A deployment that never calls
//     Admit (the redlimit service does not) meets it nowhere.
//
// Every key is written with a TTL, in milliseconds rounded up. The TTL
// lasts as long as the key holds anything:
//   - a fixed window's: until its latest window ends;
//   - a sliding window's: until the end of the window after it, while its
//     count still weighs;
//   - a sliding log's: until its newest entry is a period old;
//   - a token bucket's: until the bucket is full again.
//
// Idle keys vanish on their own, and nothing needs sweeping.
// [Store.Reset] deletes a limit's key.
//
// No call does unbounded work. A sliding log decision makes a bounded
// number of O(log n) calls whatever its cost. A denial of a large cost
// searches for the entry to wait for in O(log n) probes. An admission
// trims at most fifteen expired entries. A write trims whenever the units
// admitted pass a multiple of eight, or of the count if smaller. A batch's
// run of admissions on one log trims what they would one by one.
//
// # Leases
//
// [Store.Acquire], [Store.Renew] and [Store.Release] keep the leases of a
// concurrency limit in a sorted set per key. The set's key is the
// caller's key in braces, then ":lease". Each lease is scored by its
// expiry in the script's time. Each call trims the expired leases, counts
// and writes in one script run. So no two callers take one last slot. The
// key expires with its last lease. A restart that loses the data frees
// every slot at once. One that keeps it, or a replica promoted by a
// failover, frees each at its TTL.
//
// # Debits
//
// A [redlimit.Request.Debit] is decided by lua/debit.lua, one request
// alone too. It is counted whether it fits or not, up to the bounds of
// [redlimit.MaxCost]. A window's count and a log's live units go up to
// Count + MaxCost. A bucket's TAT goes up to tau + MaxPeriod ahead. The
// debit's result describes the key after it. A sliding log stays bounded
// however large or many the debits. An entry whose later entries hold
// Count units or more cannot change a decision. A debit merges up to two
// such entries into their successors. Deleting a member moves its units
// to the next one in the cum encoding. So a log holds at most Count live
// entries.
//
// [Store.DebitOnce] counts a debit at most once per idempotency id. So a
// debit whose call failed, not known to have run, can be sent again
// (lua/once.lua). The script that counts it also writes a marker key,
//
//	prefix{identifier}:alg:period:once:id
//
// in the limit's slot, for twice the limit's period (at least a minute).
// A call that finds it counts nothing. The resilient package charges what
// it counted during an outage this way.
//
// # Several limits and Redis Cluster
//
// On a standalone server, and on Cluster when every request has the same
// identifier, [Store.AllowAll] decides all its limits atomically in one
// script run. On Cluster (or a go-redis Ring) with several identifiers,
// the requests are grouped by identifier. Each group is decided
// atomically, and the groups concurrently. If any group denied, what the
// allowed groups consumed is refunded. No limit admits above its count
// this way. A request that arrives between the consumption and the refund
// may be denied because of it. A refund takes back the request's cost and
// nothing more, whatever was decided on the key in between. There are two
// exceptions. A token bucket refunded while other refunds of it
// interleave can get back up to the cost too much, if it would have been
// idle in between. And a Reset in between has given the cost back
// already. Debits are counted in whatever group they are and never
// refunded. A group that denied makes the request a denial, even if
// another group's node failed or hangs. That group's limits are
// [redlimit.Undecided]. A refund that certainly did not run is retried.
// Otherwise a failed refund goes to the handler set with
// [WithRefundErrorHandler]. It never turns into an admission. See
// [Store.AllowAll].
package redisstore
