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
// caller owns the client and closes it; the [Store] holds nothing else and
// needs no Close.
//
// Redis 6.2 and later are supported; the tests run on Redis 7.0, standalone
// and as a Cluster, through both client libraries.
//
// # One script per decision
//
// Every call is one run of one Lua script, so a decision reads and writes
// its keys without any other client's commands in between, however many
// application servers share them. The scripts are kept in .lua files under
// lua/, embedded with go:embed and joined once at start-up. The decision
// script (one file per algorithm, and decide.lua, which checks every limit
// and commits only if all allow) decides several limits at once, resets and
// refunds; [Script] returns it, to read or to try with redis-cli. Allowing
// or peeking at one limit runs a smaller script of its algorithm
// (single.lua followed by single_<algorithm>.lua), straight-line code with
// fewer Redis calls, which gives the same answers. The arithmetic of both
// follows the memory store's operation for operation, so the stores agree.
//
// Scripts are sent by their SHA1 with EVALSHA, and in full with EVAL only
// when a server answers NOSCRIPT (after a restart, a failover or SCRIPT
// FLUSH), which loads them there for later calls. The reply is an array of
// integers whose shape is checked; anything else is an error wrapping
// [redlimit.ErrBadReply], never a panic. Peek writes nothing.
//
// # Time
//
// By default the script reads the Redis server's clock (TIME), so
// application servers whose clocks disagree still share one timeline.
// [WithClock] makes the store pass the time to the script instead: for
// tests, or to decide at a chosen instant. Times are integer microseconds.
// Key TTLs still run on the server's clock: with a clock that stands still
// or lags behind it, state can expire before the given time says it should.
//
// # Keys
//
// The state of a limit lives under
//
//	prefix{identifier}:alg:period[:window]
//
// where prefix is [DefaultPrefix] ("redlimit:") unless [WithPrefix] sets
// another; identifier is the caller's key; alg is fw, sl, sw or tb (fixed
// window, sliding log, sliding window, token bucket); period is the limit's
// Period in microseconds; and the fixed and sliding window algorithms append
// the window's index, the Unix time in microseconds divided by the period
// and rounded down. For example, PerSecond(5) for "user:42" at Unix time
// 1700000000 keeps its count in
//
//	redlimit:{user:42}:sw:1000000:1700000000
//
// The braces make the identifier the key's hash tag: on Redis Cluster every
// key of one identifier, whatever the limit, is in the same slot. So that an
// identifier cannot pick another slot or collide with another identifier,
// the '%', '{', '}' and '#' in it are percent-escaped, and an identifier
// longer than 128 bytes is replaced by '#' and its hex SHA-256. The prefix
// may hold no brace.
//
// Every key is written with a TTL, in milliseconds rounded up, for as long
// as it holds anything: a fixed window's counter until its window ends; a
// sliding window's counter until the end of the next window, while it still
// weighs as the previous one; a sliding log (a sorted set of request times)
// until its newest entry is a period old; a token bucket's theoretical
// arrival time until the bucket is full again. Idle keys vanish on their
// own, and nothing needs sweeping. [Store.Reset] deletes a limit's keys.
//
// A sliding log holds one sorted-set member per admitted unit of cost, up to
// Count per identifier, and adds a request's cost one member at a time, while
// Redis runs nothing else; keep [redlimit.SlidingLog] for small counts and
// costs.
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
// it. See [Store.AllowAll].
package redisstore
