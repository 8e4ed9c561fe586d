// Package redisstore is a [redlimit.Limiter] on Redis, so that any number of
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
// [New] takes a rueidis client: standalone, Sentinel or Cluster, with
// concurrent decisions auto-pipelined. [NewGoRedis] takes a go-redis
// [redis.UniversalClient] the application already has: a *redis.Client
// (standalone or failover), a *redis.ClusterClient or a *redis.Ring. The
// caller owns the client and closes it, after [Store.Close]. Close waits
// for the refunds still running and ends the goroutines that send batches.
// A Store from [Open] owns its client, and its Close closes it.
//
// Redis 6.2 and later are supported; the tests run on Redis 7.0, standalone
// and as a Cluster, through both client libraries.
//
// # One script per decision
//
// Every call is one run of one Lua script, so a decision reads and writes
// its keys without any other client's commands in between, however many
// application servers share them. The scripts are kept in .lua files under
// lua/, embedded with go:embed and joined once at start-up. Every decision
// reaches Redis one way: as an entry of the batch script (lua/batch.lua),
// an allow or peek of one limit, a decision of several limits, an Admit, a
// Reset, a refund or a debit counted once; a lone call is a batch of one.
// wire.go encodes the entries and reads the reply, in the order the script
// reads them. Each algorithm's arithmetic is written once, in its file, as
// functions every entry calls. A lone decision of one limit takes a branch
// of the script that makes only its algorithm's functions, with the same
// answers.
// The arithmetic follows the memory store's operation for operation, so
// the stores agree.
//
// Scripts are sent by their SHA1 with EVALSHA, and in full with EVAL only
// when a server answers NOSCRIPT (after a restart, a failover or SCRIPT
// FLUSH), which loads them there for later calls. The reply is an array of
// integers whose shape is checked; anything else is an error wrapping
// [redlimit.ErrBadReply], never a panic. Peek writes nothing.
//
// # Batching
//
// Decisions (AllowN, Peek, AllowAll; not Admit) bound for one server that
// arrive while a call to it is in flight go together in the next call, which
// decides them one after another in arrival order at one instant, with the
// same answers as calls of their own at that instant; single-limit
// decisions on one key read and write the key once, and identical ones (a
// hot key's: one key, limit and cost) are sent once with their number and
// decided as two requests, the first and the rest. A caller that finds
// nothing in flight is sent at once; the next call goes when the one in
// flight answers, or beside it once half the decisions in play wait (two
// calls in flight at most). See [WithBatching].
//
// Each decision in a batch succeeds or fails alone. A key of another type
// (WRONGTYPE), or state the script cannot parse, fails its own decision
// with [redlimit.ErrKeyState], batched or not, and writes nothing for it.
//
// On Redis Cluster (7 or later) a batch takes the decisions of one node,
// whatever their slots, in one call sent to that node with the keys in
// ARGV (the allow-cross-slot-keys script flag); the script reads every
// key before it writes any, and a node that does not serve one (a slot
// that moved) refuses the whole batch, which is then decided again slot
// by slot. The Store keeps which node serves which slot from the client's
// view or CLUSTER SLOTS, refreshed every few seconds and after such a
// refusal. See [WithNodeBatches], and pernode.go for why this is safe
// while slots move and nodes fail over.
//
// # Time
//
// By default the script reads the Redis server's clock (TIME), so
// application servers whose clocks disagree still share one timeline.
// [WithClock] makes the store pass the time to the script instead: for
// tests, or to decide at a chosen instant. Times are integer microseconds,
// from the Unix epoch to 2^52 µs (in 2112), where the scripts' arithmetic
// is exact; a time outside, given or read from TIME, reads as the nearest
// bound, as in the memory store. Key TTLs still run on the server's clock: with a clock that
// stands still or lags behind it, state can expire before the given time
// says it should, and a clock that goes back finds state only as long as
// TTLs kept it ([WithTTLMargin]). A request at an instant before what a
// key has recorded is decided by the rules in the redlimit package
// documentation, as the memory store does.
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
// where prefix is [DefaultPrefix] ("redlimit:") unless [WithPrefix] sets
// another; identifier is the caller's key; alg is fw, sl, sw or tb (fixed
// window, sliding log, sliding window, token bucket); and period is the
// limit's Period in microseconds. For example, PerSecond(5) for "user:42"
// keeps its counts in
//
//	redlimit:{user:42}:sw:1000000
//
// The braces make the identifier the key's hash tag: on Redis Cluster every
// key of one identifier, whatever the limit, is in the same slot. So that an
// identifier cannot pick another slot or collide with another identifier,
// the '%', '{', '}' and '#' in it are percent-escaped, and an identifier
// longer than 128 bytes is replaced by '#' and its hex SHA-256. The prefix
// may hold no brace.
//
// What a key holds:
//
//   - fixed and sliding window: a hash whose fields are window indexes
//     (the Unix time in microseconds divided by the period, rounded down)
//     and whose values are the windows' counts: the key's latest window,
//     and for the sliding window the one before it;
//   - sliding log: a sorted set with a member per instant at which
//     requests were admitted, scored by the time in microseconds and
//     named by the units admitted on the key through it (modulo 2^53),
//     after a base member "b" scored -inf: the count of the last period is
//     the newest member less the one before the first live entry, found
//     in O(log n) whatever the costs;
//   - token bucket: the theoretical arrival time, in microseconds; once
//     [Store.Admit] (the reserve package) has counted a request in it,
//     "tat given last epoch": the TAT and the record its refunds need
//     (lua/token_bucket.lua), which every later call keeps until the key
//     expires or is reset. AllowN, AllowAll and Peek never make a record.
//     Versions without the record fail their decisions on such a key (a
//     script error), until it expires: during an upgrade that mixes them
//     with this one, only buckets that Admit touched meet it, and a
//     deployment that never calls Admit (the redlimit service does not)
//     meets it nowhere.
//
// Every key is written with a TTL, in milliseconds rounded up, for as long
// as it holds anything: a fixed window's until its latest window ends; a
// sliding window's until the end of the window after it, while its count
// still weighs; a sliding log's until its newest entry is a period old; a
// token bucket's until the bucket is full again. Idle keys vanish on their
// own, and nothing needs sweeping. [Store.Reset] deletes a limit's key.
//
// No call does unbounded work: a sliding log decision makes a bounded
// number of O(log n) calls whatever its cost (a denial of a large cost
// searches for the entry to wait for in O(log n) probes), and, when it
// admits, trims at most fifteen expired entries (a write trims whenever
// the units admitted pass a multiple of eight, or of the count if
// smaller; a batch's run of admissions on one log trims what they would
// one by one, at most fifteen each).
//
// # Leases
//
// [Store.Acquire], [Store.Renew] and [Store.Release] keep the leases of a
// concurrency limit in a sorted set per key (the caller's key in braces,
// then ":lease"), each lease scored by its expiry in the script's time.
// Each call trims the expired leases, counts and writes in one script run,
// so no two callers take one last slot. The key expires with its last
// lease. A restart that loses the data frees every slot at once; one that
// keeps it, or a replica promoted by a failover, frees each at its TTL.
//
// # Debits
//
// A [redlimit.Request.Debit] is decided by lua/debit.lua, one request
// alone too: it is counted whether it fits or not, up to the
// bounds of [redlimit.MaxCost] (a window's count and a log's live units up
// to Count + MaxCost, a bucket's TAT up to tau + MaxPeriod ahead), and its
// result describes the key after it. A sliding log stays bounded however
// large or many the debits: an entry whose later entries hold Count units
// or more cannot change a decision, and a debit merges up to two of them
// into their successors (deleting a member moves its units to the next in
// the cum encoding), so a log holds at most Count live entries.
//
// [Store.DebitOnce] counts a debit at most once per idempotency id, so a
// debit whose call failed, not known to have run, can be sent again
// (lua/once.lua): the script that counts it also writes a marker key,
//
//	prefix{identifier}:alg:period:once:id
//
// in the limit's slot, for twice the limit's period (at least a minute),
// and a call that finds it counts nothing. The resilient package charges
// what it counted during an outage this way.
//
// # Several limits and Redis Cluster
//
// On a standalone server, and on Cluster when every request has the same
// identifier, [Store.AllowAll] decides all its limits atomically in one
// script run. On Cluster (or a go-redis Ring) with several identifiers, the
// requests are grouped by identifier, each group decided atomically and the
// groups concurrently, and what the allowed groups consumed is refunded if
// any group denied. No limit admits above its count this way; a request that
// arrives between the consumption and the refund may be denied because of
// it. A refund takes back the request's cost and nothing more, whatever was
// decided on the key in between, with two exceptions: a token bucket
// refunded while other refunds of it interleave, if it would have been idle
// in between, can get back up to the cost too much; and a Reset in between
// has given the cost back already. Debits are counted in whatever group
// they are and never refunded. A group that denied makes the request a
// denial even if another group's node failed or hangs (that group's limits
// are [redlimit.Undecided]); a refund that cannot be made is retried when it
// certainly did not run, and otherwise reported to the handler set with
// [WithRefundErrorHandler], never turned into an admission. See
// [Store.AllowAll].
package redisstore
