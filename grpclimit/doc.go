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
// [github.com/redlimit/redlimit/httplimit]: the enforced rules of a call are
// decided in one [redlimit.Limiter.AllowAll], a call denied by any consumes
// none, and a key function returning [ErrNoKey] skips its rule. The key
// functions provided are [PeerIP] and [RemoteIP] (the client network, found
// by a [clientip.Resolver] as httplimit finds it, reading x-forwarded-for or
// forwarded metadata),
// [Metadata] (such as an API key), [User], [Method] (the full method name)
// and [Static], combined with [Compose], [Or] and [Hashed].
//
// # Limits and costs per call
//
// A rule's LimitFunc chooses the limit of each call, such as the limit of
// its tenant's plan, and its CostFunc the cost, such as the size of the
// request message or the tokens it will use. Both read the call's context,
// its full method name and its request message (nil for a stream, which is
// decided when it opens). A function that fails, a limit that is not valid
// or a cost outside 1..[redlimit.MaxCost] refuse that call alone with
// codes.InvalidArgument, and consume nothing. A cost above the call's limit
// is denied with no RetryInfo: it never passes. Route rules are
// httplimit's; here a key or limit function reads the method.
//
// # Denials
//
// A denied call fails with codes.ResourceExhausted before its handler runs,
// with two details: a RetryInfo (google.rpc.RetryInfo) whose retry_delay
// says when the call could pass, and a QuotaFailure naming the rules that
// denied it. A stream is decided once, when it is opened.
//
// Every call a rule applied to gets the rate-limit fields of package
// ratelimitfield as response header metadata, lower-case: ratelimit-policy,
// ratelimit, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset, and
// retry-after on denials. [Options].Metadata selects them.
//
// # In-flight rules
//
// A rule with InFlight set holds a slot of a [redlimit.Concurrency] on its
// key for the life of each call or stream, as httplimit's in-flight rules
// do for requests: taken after the rate rules allow the call, renewed
// while the handler runs, freed when it returns. A call that finds no free
// slot fails with codes.ResourceExhausted and the two details above.
//
// # Clients
//
// [UnaryClientInterceptor] retries calls refused with ResourceExhausted and
// a RetryInfo, after the delay plus jitter, as a [backoff.Policy] allows.
package grpclimit
