// Package httplimit rate limits HTTP servers. It has a [net/http]
// middleware that works with any router built on [http.Handler]: the Go
// 1.22 mux, chi, gorilla. It writes the standard rate-limit header fields,
// and problem responses.
//
//	ip, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: proxies})
//	...
//	limits, err := httplimit.New(store, httplimit.Options{},
//		httplimit.Rule{Name: "ip", Limit: redlimit.PerSecond(10), Key: ip},
//		httplimit.Rule{Name: "key", Limit: redlimit.PerMinute(1000), Key: httplimit.Hashed(httplimit.Header("X-API-Key"))},
//	)
//	...
//	http.ListenAndServe(addr, limits.Handle(mux))
//
// # Rules and keys
//
// A [Middleware] holds one or more [Rule]s. Each is a named
// [redlimit.Limit] with a [KeyFunc] that says whose allowance a request
// draws on. The key functions provided are:
//   - [IPKey]: by client network, see below;
//   - [Header]: an API key;
//   - [User]: the authenticated user that [WithUser] put in the request's
//     context;
//   - [Route] and [MuxRoute]: the mux pattern;
//   - [Static]: one allowance for all.
//
// [Compose] combines several into one key. It escapes the parts, so none
// can forge another combination. [Or] takes the first that applies.
// [Hashed] keeps secrets out of the store and logs.
//
// A key function may find nothing to key by: no API key header, no user.
// It then returns [ErrNoKey], and its rule is skipped for that request.
// That gives per-key limits for clients that send a key. [Or] gives a
// fallback such as the client IP. Any other error refuses the request, by
// default with 400 (see [Options].OnError). A shadow rule's error is
// logged and the rule skipped instead: a shadow rule never refuses a
// request.
//
// The store key of a request is the rule's name, ':' and the key. So rules
// never share state unless they share a name. Limits for a single route
// are rules with a Pattern (see "Routes"). That keeps one decision per
// request.
//
// # Limits and costs per request
//
// A rule's LimitFunc chooses the limit of each request, such as the limit
// of its tenant's plan (free 100 a minute, pro 10,000). Its CostFunc
// chooses the cost, such as the request's size or the tokens it will use.
// The RateLimit fields show the limit each request was held to. Some
// inputs refuse that request alone, and consume nothing: a function that
// fails, a limit that is not valid, or a cost outside
// 1..[redlimit.MaxCost]. OnError answers them (by default 400, see
// [KeyError]). An error wrapping [ErrNoKey] skips the rule. A cost above
// the request's limit is denied, without Retry-After: it never passes.
//
// # Routes
//
// A rule with a Pattern, such as "POST /v1/chat/{id}", applies only to the
// requests of that route. Rules without one apply to every request. The
// patterns are those of [http.ServeMux], and so is their precedence. The
// middleware holds its rules' patterns in a ServeMux of its own. A request
// matches the one pattern that mux routes it to, the most specific: a host
// before none, "GET /items/{id}" before "/items/". A request the mux would
// redirect or answer 404 or 405 matches none. Rules on one route use the
// same pattern string. New refuses malformed and conflicting patterns. The
// mux sees the request as the middleware does. So wrap the whole mux, not
// a handler behind http.StripPrefix.
//
// # Client IP
//
// [clientip.Resolver], which grpclimit shares, takes the client's address
// from the connection (RemoteAddr). A connection from a trusted proxy
// network (TrustedProxies) is the exception. Then it reads
// X-Forwarded-For, or Forwarded (RFC 7239) if so configured, from right to
// left. It takes the right-most address that is not a trusted proxy. A
// client can put anything in the header, but not to the right of what the
// proxies appended. By default IPv6 clients are grouped by /64, and IPv4
// ones stand alone. So one host cannot rotate through its addresses.
//
// # Several limits
//
// The enforced rules that apply to a request are decided together, in one
// [redlimit.Limiter.AllowAll] call. The request passes only if every rule
// allows it. A request denied by any rule consumes none of them.
//
// # Responses
//
// Every response to a request that an enforced rule applied to carries
// rate-limit header fields, selected by [Options].Headers:
//
//   - RateLimit-Policy and RateLimit, in the syntax of
//     draft-ietf-httpapi-ratelimit-headers-10. RateLimit-Policy lists each
//     rule that applied: "ip";q=10;w=1, "key";q=1000;w=60. RateLimit gives
//     the remaining quota r and reset time t of the one closest to running
//     out: "ip";r=3;t=1;
//   - X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset, for
//     that same rule.
//
// The rule closest to running out is the one [redlimit.Tightest] picks.
// Times are whole seconds, rounded up. t and X-RateLimit-Reset are how
// long until the rule is back to its full allowance. On a denial, they are
// how long until the request could pass. Package
// [github.com/redlimit/redlimit/ratelimitfield] formats the fields, for
// grpclimit and the rate limit service too. It also parses them back.
//
// A denied request gets 429 (Too Many Requests) and Retry-After in whole
// seconds, rounded up. Its body is an RFC 9457 application/problem+json
// of type quota-exceeded. It names the rules that denied the request and
// says when to retry (see [WriteDenial] and [Problem]). [Options].OnDenied
// replaces the status and body. A request that can never pass gets 429
// without Retry-After: its cost is above the limit's capacity. New rules
// that out for its own rules.
//
// # Delay mode
//
// A rule with [Rule].Delay delays a request it would deny, instead of
// refusing it, as NGINX's delay= does. The request waits its turn with
// redlimit.Wait, up to Delay, and is then served. One that would wait
// longer gets 429 at once. With a token bucket, the requests queue in
// order across every process sharing the store.
//
// # Shadow mode
//
// A rule with Shadow set is a dry run. It is decided and counted, and a
// request it would deny is logged. But it never denies and has no header
// field. Each shadow rule counts the requests as if it alone were added to
// the enforced rules. It consumes for the requests that they and it
// allow. So what it logs is what enforcing it would refuse. Shadow rules
// never make the enforced rules consume or refuse anything. The rate limit
// service's shadow mode means the same.
//
// # In-flight rules
//
// A rule with InFlight set holds a slot of a [redlimit.Concurrency] on its
// key for the life of each request. At most Slots requests of a key run at
// once, across every server sharing the store. The slot is taken after the
// rate rules allow the request. It is renewed while the handler runs past
// the TTL, and freed when it returns. A server that dies frees its slots
// at the TTL. A request that finds no free slot gets 429. Its Retry-After
// is the time until the first lease expires. The middleware's limiter
// must also be a [redlimit.Semaphore], as both stores are.
//
// # Failures
//
// When the limiter fails (Redis unreachable, a deadline), the middleware
// serves the request without limits and logs the error: it fails open.
// With [Options].FailClosed it answers 503 (Service Unavailable) instead.
// A request's context may end before the limiter decides its enforced
// rules: its client went away. Such a request is never served. It gets
// OnError's answer, fail open or not. Shadow rules alone never refuse. A
// resilient limiter in front of the store can decide more finely; this is
// the last line.
//
// # Clients
//
// Package [github.com/redlimit/redlimit/backoff] has an [http.RoundTripper]
// that honours Retry-After and can pace itself by the RateLimit field.
package httplimit
