// Package resilient wraps a store (normally redisstore's) so that its
// failures neither fail the caller nor let clients flood. A [Limiter] is a
// [redlimit.Limiter] in front of it.
//
//	l, err := resilient.New(store, resilient.Options{Nodes: registry})
//	if err != nil {
//		return err
//	}
//	defer l.Close()
//	res, err := l.Allow(ctx, "ip:"+ip, redlimit.PerSecond(5)) // res.Source: who decided
//
// A decision takes the first of these paths that answers it:
//
//   - the deny cache: a key and limit the store denied with nothing left,
//     until the store's retry-after ([redlimit.FromDenyCache]);
//   - rejoining: for [FallbackOptions.Rejoin] after an outage, a decision
//     of limits that fail local must also fit this node's share. So the
//     nodes back first do not spend what the others admitted by themselves;
//   - the store, within [Options.Timeout] (or the caller's deadline less a
//     margin) and while the circuit breaker is closed;
//   - each limit's failure policy, when the store failed or the breaker is
//     open: [redlimit.FailLocal], [redlimit.FailOpen] or
//     [redlimit.FailClosed]. FailLocal is an in-process limiter with this
//     node's share, starting from what the store last said.
//
// A key whose state the store cannot use ([redlimit.ErrKeyState]), or a
// calendar window this host's clock cannot place ([redlimit.ErrClockSkew]),
// fails that decision with the error. It is not a store failure: no policy
// answers it, and the breaker does not count it.
//
// What the local fallback admitted is owed to the store and charged to it
// once it answers again ([Limiter.Reconciliation]). Every [redlimit.Result]
// says which path decided it. [Options.Observer] is told of each; the
// module github.com/redlimit/redlimit/prometheus makes them metrics.
//
// # Parts
//
// Each part has a file and an options group:
//
//   - the store call (call.go, [Options.Timeout]): on the caller's
//     goroutine for a store that returns by its context's deadline, else
//     on a kept worker; either way in a context with the call's deadline;
//   - the breaker and the failure policies (breaker.go, [Options.Breaker]);
//   - the deny cache (denycache.go, [Options.DenyCache]);
//   - the local fallback and the rejoin (fallback.go, [Options.Fallback]);
//   - reconciliation (reconcile.go, [Options.Reconcile]).
//
// docs/RELIABILITY.md gives the guarantees and the fault tests: a Redis
// killed, hung, a Cluster master failing over.
package resilient
