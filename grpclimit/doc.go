// Package grpclimit rate limits gRPC servers, with unary and stream server
// interceptors, and makes gRPC clients honour the server's RetryInfo.
//
//	in, err := grpclimit.New(store, grpclimit.Options{},
//		grpclimit.Rule{Name: "peer", Limit: redlimit.PerSecond(50), Key: grpclimit.RemoteIP},
//		grpclimit.Rule{Name: "method", Limit: redlimit.PerMinute(1000), Key: grpclimit.Method},
//	)
//	...
//	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
//
// Rules, keys, shadow mode and failures work as in
// [github.com/redlimit/redlimit/httplimit]. The enforced rules of a call
// are decided in one [redlimit.Limiter.AllowAll]. A call denied by any
// consumes none. A key function returning [ErrNoKey] skips its rule. The
// key functions provided are:
//   - [PeerIP] and [RemoteIP]: the client network, found by a
//     [clientip.Resolver] as httplimit finds it. It reads x-forwarded-for
//     or forwarded metadata;
//   - [Metadata], such as an API key;
//   - [User];
//   - [Method], the full method name;
//   - [Static].
//
// [Compose], [Or] and [Hashed] combine them.
//
// # Limits and costs per call
//
// A rule's LimitFunc chooses the limit of each call, such as the limit of
// its tenant's plan. Its CostFunc chooses the cost, such as the size of
// the request message or the tokens it will use. Both read the call's
// context, its full method name and its request message. The message is
// nil for a stream, which is decided when it opens. Some inputs refuse
// that call alone with codes.InvalidArgument, and consume nothing: a
// function that fails, a limit that is not valid, or a cost outside
// 1..[redlimit.MaxCost]. A cost above the call's limit is denied with no
// RetryInfo: it never passes. Route rules are httplimit's. Here a key or
// limit function reads the method.
//
// # Denials
//
// A denied call fails with codes.ResourceExhausted before its handler
// runs. It has two details. A RetryInfo (google.rpc.RetryInfo) has a
// retry_delay that says when the call could pass. A QuotaFailure names the
// rules that denied it. A stream is decided once, when it is opened.
//
// Every call a rule applied to gets the rate-limit fields of package
// ratelimitfield as response header metadata, lower-case. They are
// ratelimit-policy, ratelimit, x-ratelimit-limit, x-ratelimit-remaining,
// x-ratelimit-reset, and retry-after on denials. [Options].Metadata
// selects them.
//
// # In-flight rules
//
// A rule with InFlight set holds a slot of a [redlimit.Concurrency] on its
// key for the life of each call or stream. httplimit's in-flight rules do
// the same for requests. The slot is taken after the rate rules allow the
// call, renewed while the handler runs, and freed when it returns. A call
// that finds no free slot fails with codes.ResourceExhausted and the two
// details above.
//
// # Clients
//
// [UnaryClientInterceptor] retries calls refused with ResourceExhausted and
// a RetryInfo, after the delay plus jitter, as a [backoff.Policy] allows.
package grpclimit
