// Package server runs the redlimit rate limit service (`redlimit serve`):
// the rls package's Envoy RLS v3 over gRPC and HTTP, on a store, with its
// configuration reloaded as it changes, metrics, a live dashboard, health
// and a graceful shutdown.
//
// # Store
//
// With Options.RedisURL, the limits live in Redis (redisstore.Open), behind
// a resilient.Limiter (deadline Options.Timeout, circuit breaker, each
// rule's failure_policy, deny cache) whose local fallback takes this node's
// share of each limit, counted by the live-node registry
// (redisstore.Store.Register). Without it, the limits live in this
// process's memory (memory.Store), which New logs as a warning.
//
// # gRPC
//
// envoy.service.ratelimit.v3.RateLimitService, grpc.health.v1.Health (""
// and the RLS service: SERVING while ready, see below) and server
// reflection. Keepalive pings every 30 s (clients may ping every 5 s),
// messages up to Options.MaxMessageBytes (1 MiB), a panic in a handler
// answered Internal instead of crashing the process.
//
// # HTTP
//
//	POST /json         the RLS in protojson: 200 OK, 429 over limit; problem+json 400 (bad request),
//	                   413 (body above MaxMessageBytes), 503 (no configuration)
//	GET  /healthz      200 while the process runs (liveness)
//	GET  /readyz       200 once the configuration is loaded and, with Redis, while Redis answers PING;
//	                   503 with the reason otherwise, and from the start of a shutdown
//	GET  /healthcheck  /readyz under envoyproxy/ratelimit's name
//	GET  /metrics      Prometheus, on a registry of the server's own (see [Metrics])
//	GET  /rules        the configuration in use: files, domains, rules
//	GET  /debug/pprof/ runtime profiles, only with Options.Pprof
//	GET  /             the live dashboard (package dashboard), unless Options.NoDashboard;
//	                   with /static/FILE, /api/stats, /api/events (server-sent events) and /api/rules
//
// Timeouts: 5 s to read the header, 10 s to read the request and to write
// the response (the dashboard's event streams extend theirs), 2 min idle;
// headers up to 64 KiB. The routes above the dashboard's take precedence.
//
// # Dashboard
//
// The service reports every decision to the Prometheus metrics and to a
// dashboard.Recorder: each limited descriptor (its rule, outcome, the path
// that decided and, for a denial, the key as its entries, such as
// "remote_address=10.0.0.1"), the latency of each backend call (but those
// the deny cache answered without asking the store), and as
// backend errors the calls that failed and those a failure policy answered
// (local, fail_open, fail_closed). The breaker's state is the resilient
// limiter's on Redis; on memory there is no breaker ("n/a"). The page's
// rules are those of GET /rules, and its "try a request" form posts to
// /json, so what it shows is what the service decides.
//
// # Configuration
//
// New loads Options.ConfigPath (internal/config.Load) before it binds
// anything: a configuration that does not load is New's error, and the
// service never answers without one. Run then watches the path (see
// [Server.Reload]): a file written in place, renamed over, or swapped behind
// a symbolic link as Kubernetes ConfigMap volumes do reloads it after
// Options.ReloadDebounce (100 ms) without further change. A configuration
// that does not load is logged and counted, and the one in use keeps
// serving. No ConfigPath: no rules, every request allowed, logged as a
// warning.
//
// # Shutdown
//
// When Run's context ends, the server reports not ready, stops accepting
// connections, ends the dashboard's event streams, lets requests in flight
// finish for up to
// Options.ShutdownTimeout (10 s; then cuts them off), stops the watcher,
// leaves the live-node registry and closes the store. Nothing it started
// keeps running after Run returns.
package server
