// Package backoff makes clients wait when a server asks them to: an
// [http.RoundTripper], [Transport], that retries requests refused with 429
// or 503 and Retry-After, and the [Policy] it and
// [github.com/redlimit/redlimit/grpclimit.UnaryClientInterceptor] share.
//
//	client := &http.Client{Transport: &backoff.Transport{
//		Policy: backoff.Policy{MaxAttempts: 5, MaxWait: 30 * time.Second},
//		Pace:   true,
//	}}
//
// # Waiting
//
// A wait is what the server asked for (Retry-After in delta-seconds or as an
// HTTP-date; a gRPC RetryInfo delay) plus up to 10% of jitter, so that
// clients told the same moment do not all come back at once. It is never
// shortened: when the server asks for longer than Policy.MaxWait, or than
// the request's context deadline leaves, the client gives up at once and
// returns the server's answer.
//
// # What is retried
//
// [Transport] sends a request again only if that is safe: an idempotent
// method, or an Idempotency-Key header, or any method with RetryAnyMethod;
// and a body that can be read again (Request.GetBody). A body already
// consumed is never replayed.
//
// # Pacing
//
// With Transport.Pace, a response whose RateLimit field
// (draft-ietf-httpapi-ratelimit-headers) says a quota is used up (r=0) for
// t seconds holds back the following requests to that host for t seconds,
// before the server has to refuse them.
package backoff
