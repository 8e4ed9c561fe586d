// Package ratelimitfield formats and parses the fields that tell a client
// about its rate limits:
//
//   - RateLimit-Policy and RateLimit, of draft-ietf-httpapi-ratelimit-headers-10
//     ([QuotaPolicy], [ServiceLimit]);
//   - X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset;
//   - RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, the names
//     envoyproxy/ratelimit uses;
//   - Retry-After ([RetryAfterValue]).
//
// It knows nothing of any protocol. httplimit writes the fields as HTTP
// header fields. grpclimit writes them as gRPC response metadata. The rate
// limit service writes them as the headers it asks Envoy to add. backoff
// reads them back with [ParseRateLimit]. A [Style] selects which fields a
// response carries. [Style.Write] writes them for the limits that applied
// to one request:
//
//	ratelimitfield.All.Write(quotas, w.Header().Set)
//
// # What the fields say
//
// RateLimit-Policy lists each limit that applied: "ip";q=10;w=1,
// "key";q=1000;w=60. The others describe the one closest to running out,
// as [redlimit.Tightest] picks it. That is a denial first, else the
// smallest remaining relative to its size. Times are whole seconds,
// rounded up. The reset is RateLimit's t, X-RateLimit-Reset and
// RateLimit-Reset. It is how long until the limit is back to its full
// allowance. On a denial, it is how long until the request could pass
// ([ServiceLimitOf]). A request that can never pass has none.
package ratelimitfield
