// Package rls is the Envoy Rate Limit Service v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit). It runs
// on a redlimit.Limiter and a rule configuration from the internal/config
// package. [Service.SetConfig] swaps the configuration while requests are
// served. [Service.JSONHandler] serves the same messages as JSON over HTTP
// (POST /json, as envoyproxy/ratelimit does).
//
// # A request
//
// A request within the caps of [Options] gets, for each descriptor:
//
//   - no limit (OK, limit_remaining 0) in four cases: an unknown domain; a
//     descriptor that matches no rule; a rule named in the replaces of
//     another rule the request matched; a refund (is_negative_hits).
//     redlimit has no refund here, so what was consumed stays consumed;
//   - OK with limit_remaining 4294967295 for an unlimited rule;
//   - OVER_LIMIT without asking the limiter for a rule with
//     requests_per_unit 0 (envoyproxy/ratelimit's block);
//   - otherwise its rule's limit, or the descriptor's own limit override.
//     It is counted by the matched rule's algorithm and failure policy.
//     In a calendar rule's unit, it counts in the rule's calendar.
//     With no limited rule matched, Options.DefaultAlgorithm counts it.
//     [OverridePolicy] and Options.MaxOverridePeriod say which overrides
//     are taken.
//
// A limit is kept under the domain and the descriptor's entries. The
// descriptor may have gone through a share_threshold wildcard. There the
// pattern stands for the request's value, so every value it matches counts
// against one limit (config.Descriptor.KeyValue). A limit override is kept
// under the request's values, as in envoyproxy/ratelimit.
//
// # Hits: admissions and debits
//
// A descriptor costs its own hits_addend when set, else the request's.
// There 0 (unset) means 1. A descriptor's own hits_addend of 0 checks
// without consuming, as in envoyproxy/ratelimit. It is a Limiter.Peek of
// a cost of 1, which passes while one more hit fits. envoyproxy/ratelimit
// passes it until the count is above the limit, one hit later. Its status
// shows the key as it is. limit_remaining is what is left, as
// envoyproxy/ratelimit shows it. duration_until_reset is when the key is
// whole again. For a fixed window that is its end, even for a fresh key,
// as envoyproxy/ratelimit says.
//
// Hits are counted one of two ways. The counting of the descriptor's rule
// chooses, else that of its file, else Options.Counting (config.Counting):
//
//   - an admission: a request that does not fit is denied and consumes
//     nothing. So a client retrying while denied does not push its limit
//     further away. That is redlimit's way, and plain requests get it by
//     default;
//   - a debit: the hits are recorded whatever the limit says, over it too.
//     They are answered OVER_LIMIT when they take the key over, as
//     envoyproxy/ratelimit counts every hit. Later requests are denied
//     until the debt has drained. The check-then-debit flow of cost
//     budgets (LLM tokens, bytes) needs this. Envoy checks with a
//     descriptor hits_addend of 0 before the work. Afterwards it reports
//     the cost it measured (apply_on_stream_done) in a descriptor
//     hits_addend. Nobody reads that answer. Were it dropped, a cost that
//     does not fit would be spent and never counted.
//
// The default counting, auto, makes a descriptor that carries its own
// hits_addend a debit. Envoy sets it from a route's hits_addend, as that
// flow does. Any other descriptor is an admission. A debit is a
// redlimit.Request.Debit. Its answer is OVER_LIMIT when it did not fit.
// It is counted whatever any limit of the request says. That holds even
// when a deny-all rule or a spent check denies the request before the
// limiter is asked for the rest.
//
// # One decision
//
// The limited descriptors of a request are decided in one
// Limiter.AllowAll. A request that any enforced limit denies consumes
// none of the others. envoyproxy/ratelimit counts every descriptor of a
// denied request. Two descriptors that would share state (the same
// descriptor twice) are one limit for the sum of their costs. A deny-all
// rule, or a checked descriptor with nothing left, may deny. The other
// limits are then only peeked.
//
// # Quotas
//
// A quota_mode rule is a quota, as in envoyproxy/ratelimit. With
// Options.QuotaMode, every limit is. A request is denied for its quotas
// only when every quota it carries is over its limit. A spent quota is
// OVER_LIMIT in its own status while the request passes for another. It
// consumes nothing. The quotas with room consume as shadow limits do:
// each as if it alone were added to the enforced limits. A request whose
// quotas are all spent is denied and consumes nothing. Its Retry-After is
// when the first quota could pass. A checked quota (hits_addend 0) with
// room satisfies the request's quotas. With Options.QuotaMode, a
// descriptor without a limit counts as a quota with room: no rule, or
// replaced, but not unlimited. So such a request always passes, as in
// envoyproxy/ratelimit. A quota in shadow mode is a shadow limit.
//
// # Dynamic metadata
//
// With Options.DynamicMetadata (envoyproxy/ratelimit's
// RESPONSE_DYNAMIC_METADATA), every response carries dynamic metadata. It
// is written as envoyproxy/ratelimit writes it:
//   - "domain";
//   - "descriptors", each with its "entries" as "key=value", its limit
//     override as "limit" and its own "hitsAddend";
//   - the request's "hitsAddend" when set;
//   - "metadata": the metadata of the rules whose descriptors passed,
//     merged in the request's order. The first rule's field wins. Passed
//     means not OVER_LIMIT: spent quotas and denials are left out, shadow
//     limits are not.
//
// Envoy's rate limit filter puts it in the namespace
// envoy.filters.http.ratelimit. There
// %DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:upstream:name)%
// reads it. With one quota per backend, it names the backend with room.
//
// # Metrics
//
// Each limited descriptor is reported to Options.Observer under its rule's
// path. With detailed_metric or value_to_metric, it is reported under the
// name envoyproxy/ratelimit gives its stats with the request's values
// (config.Rule.MetricName). Options.MaxDetailedSeries and
// MaxDetailedSeriesPerRule cap those.
//
// Those labels name values a client chooses, so they are capped. Each is
// at most [MaxDetailedLabelBytes] long. A rule holds at most
// MaxDetailedSeriesPerRule of them at once; the service holds at most
// MaxDetailedSeries. A descriptor whose label holds no slot is reported
// under the rule's path: the overflow series. The slots go to the values
// that are frequent, not to the first seen. While a rule has room, a new
// label takes a slot. Once it is full, a label may take the slot of the
// rule's least counted label. It must have been counted at least twice,
// and half as much again as that one. Every count is halved each
// 8×MaxDetailedSeriesPerRule descriptors of the rule that found no slot.
// So a flood of values sent once each never takes a slot that is held.
// Take a value sent at least once in 2×MaxDetailedSeriesPerRule (or 64)
// of the rule's descriptors without a slot. It wins a slot from rarer
// values, within two of its requests against such a flood. A value that
// stops loses its slot to one that goes on. A label that loses its slot is
// dropped from an Observer that implements [LabelDropper]. The service's
// metrics then delete its series. That happens before another label takes
// the slot. So the series stay within the caps at every moment. A
// configuration reload gives back the labels of the rules it no longer
// names by values: removed, renamed, no longer detailed. They are dropped
// the same way. The rules it keeps keep theirs.
//
// # Shadow mode
//
// A shadow limit is decided and counted but never denies. shadow_mode in
// a rule makes one; Options.Shadow makes every limit one. Its status is
// OK, with the limit_remaining it has. Its denials show as the
// ShadowDenied outcome. It has no header field. It counts as if it alone
// were added to the enforced limits, as httplimit's shadow rules do
// (package shadow). What it denies is what enforcing it would deny,
// whatever other shadow limits say.
//
// # Reset
//
// For a request allowed, duration_until_reset is how long until the
// limit's whole allowance is back if nothing else is admitted
// (Result.ResetAfter). For a request denied, it is how long until a
// request of the same cost could pass (Result.RetryAfter). By algorithm:
//
//	fixed_window    the end of the current window, allowed or denied (as envoyproxy/ratelimit)
//	sliding_log     allowed: when the newest request counted leaves the log;
//	                denied: when enough of the oldest have left it
//	sliding_window  allowed: when the current window's count stops weighing (the end of the next window);
//	                denied: when the weighted count has dropped enough
//	token_bucket    allowed: when the bucket is full again; denied: when enough tokens are back
//
// The header fields (Options.Headers) carry the same reset in whole seconds,
// from the enforced limits, as package ratelimitfield writes them.
package rls
