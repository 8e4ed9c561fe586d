// Package rls is the Envoy Rate Limit Service v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on a
// redlimit.Limiter and a rule configuration from the internal/config
// package, which [Service.SetConfig] swaps while requests are served.
// [Service.JSONHandler] serves the same messages as JSON over HTTP (POST
// /json, as envoyproxy/ratelimit does).
//
// # A request
//
// A request is checked first (see [ErrInvalidRequest] and the caps of
// [Options]: 64 descriptors, 32 entries each, 64 KiB of domain, keys and
// values by default). Then each descriptor gets its limit:
//
//   - an unknown domain applies no limit to any descriptor, and a
//     descriptor that matches no rule has none: status OK, no current
//     limit, limit_remaining 0, as envoyproxy/ratelimit answers;
//   - an unlimited rule: OK, limit_remaining 4294967295;
//   - a rule with requests_per_unit 0 (envoyproxy/ratelimit's block):
//     OVER_LIMIT, limit_remaining 0, duration_until_reset one unit, without
//     asking the limiter; the request's other limits are only peeked, as for
//     any denied request (in shadow mode: counted as a shadow denial, OK);
//   - a descriptor's own limit override (requests_per_unit, unit,
//     unit_multiplier), in a known domain, replaces the rule's limit; it is
//     counted by the matched rule's algorithm and failure policy, or by
//     Options.DefaultAlgorithm when no limited rule matched; it is never in
//     shadow mode of its own (only with Options.Shadow);
//   - a rule named in the replaces of another rule matched by the same
//     request applies no limit.
//
// The cost of a descriptor is its own hits_addend when set, else the
// request's hits_addend, where 0 (unset) means 1. A descriptor's own
// hits_addend of 0 means "check without consuming", as in
// envoyproxy/ratelimit: the limit is asked what a request of cost 1 would
// get (Limiter.Peek), and nothing is consumed. A descriptor with
// is_negative_hits (a refund) is answered OK with no limit: redlimit has no
// refund, so what was consumed stays consumed.
//
// # One decision
//
// All limited descriptors of a request are decided in one
// Limiter.AllowAll call: a request that any enforced limit denies consumes
// none of the other limits (envoyproxy/ratelimit increments every counter
// of a request, even when it denies it). Two descriptors that would share
// state (the same entries, algorithm and period: the same descriptor twice)
// become one limit with the sum of their costs.
//
// Each limit's state is kept under a key made of the domain and every
// entry's key and value, each prefixed by its length, so that no two
// descriptors share a key whatever their strings hold:
// "3:api;14:remote_address=8:10.0.0.1". The store adds the algorithm and the
// period; a configuration reload that changes only a count keeps the counts
// made so far.
//
// # Shadow mode
//
// A shadow limit (shadow_mode in a rule, or every limit with Options.Shadow)
// is decided and counted but never denies: its status is OK, with the
// limit_remaining it has, and its denials show as the ShadowDenied outcome.
// Shadow limits must neither block the request nor let the enforced limits
// consume what they would not have. So enforced and shadow limits go to the
// limiter together, in one AllowAll; if it allows, everything consumed in
// one round trip (the usual case). If it denies and an enforced limit is
// among those that denied, the request is denied and nothing was consumed.
// If only shadow limits denied, the enforced limits alone are decided again
// (a second AllowAll), and the request gets their answer. Each shadow limit
// thus counts what it would count if shadow mode were switched off: a
// request it would deny is not counted. Under Options.Shadow the counts are
// exactly those that enforcement would make.
//
// # Statuses and reset
//
// Each limited descriptor's status holds its code, its current_limit (the
// rule's name, requests_per_unit and unit, or the override's),
// limit_remaining and duration_until_reset. "Reset" is, for a request
// allowed, how long until the limit's whole allowance is back if nothing
// else is admitted (Result.ResetAfter); for a request denied, how long
// until a request of the same cost could pass (Result.RetryAfter). By
// algorithm:
//
//	fixed_window    the end of the current window, allowed or denied (as envoyproxy/ratelimit)
//	sliding_log     allowed: when the newest request counted leaves the log;
//	                denied: when enough of the oldest have left it
//	sliding_window  allowed: when the current window's count stops weighing (the end of the next window);
//	                denied: when the weighted count has dropped enough
//	token_bucket    allowed: when the bucket is full again; denied: when enough tokens are back
//
// The header fields (Options.Headers, off by default) carry the same reset,
// in whole seconds rounded up, from the enforced limit closest to running
// out ([redlimit.Decision.Tightest]): a denial first, else the smallest
// remaining relative to its limit. A denied request also gets Retry-After.
// Shadow limits never show in the header fields.
//
// # Errors
//
// ShouldRateLimit answers InvalidArgument for a bad request, Unavailable
// before the first configuration (the service never answers without one)
// or once the limiter is closed, and Internal when the limiter fails. With
// a resilient.Limiter, a failing store is not an error: the failure policies
// answer, and each descriptor's source says so.
package rls
