// Package backoff makes clients wait when a server asks them to. Its
// [Transport] is an [http.RoundTripper] that retries requests refused with
// 429 or 503 and Retry-After. Its [Policy] is shared by Transport and
// [github.com/redlimit/redlimit/grpclimit.UnaryClientInterceptor].
//
//	client := &http.Client{Transport: &backoff.Transport{
//		Policy: backoff.Policy{MaxAttempts: 5, MaxWait: 30 * time.Second},
//		Pace:   true,
//	}}
//
// # Waiting
//
// A wait is what the server asked for, plus up to 10% of jitter. The
// server asks with Retry-After, in delta-seconds or as an HTTP-date, or
// with a gRPC RetryInfo delay. The jitter keeps clients told the same
// moment from all coming back at once. A wait is never shortened. The
// server may ask for longer than Policy.MaxWait, or than the request's
// context deadline leaves. Then the client gives up at once and returns
// the server's answer.
//
// # What is retried
//
// [Transport] sends a request again only if that is safe. It needs an
// idempotent method, an Idempotency-Key header, or RetryAnyMethod. It
// needs a body that can be read again (Request.GetBody). A body already
// consumed is never replayed.
//
// # Pacing
//
// With Transport.Pace, a response's RateLimit field
// (draft-ietf-httpapi-ratelimit-headers) may say a quota is used up (r=0)
// for t seconds. The following requests to that host then wait t seconds.
// So the server does not have to refuse them.
package backoff
