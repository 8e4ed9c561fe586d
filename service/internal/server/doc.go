// Package server runs the redlimit rate limit service (`redlimit serve`).
// It serves the rls package's Envoy RLS v3 over gRPC and HTTP, on a store.
// It reloads its configuration as it changes. It has metrics, a live
// dashboard, health and a graceful shutdown. [New] builds it from
// [Options]. [Server.Run] serves until its context ends. [Main] is the
// command, its flags and environment variables wired to Options.
//
// # Store
//
// With Options.RedisURL, the limits live in Redis (redisstore.Open).
// RedisURLFile does the same, and keeps the password off the command line.
// A resilient.Limiter stands in front. Its local fallback takes this
// node's share of each limit, counted by the live-node registry. Without
// Redis, the limits live in this process's memory (memory.Store). New logs
// that as a warning. The URL is only ever logged or reported with its
// password redacted. A Redis that cannot be reached at start-up stops
// nothing. The store opens in the background (lazyStore), and the failure
// policies answer until then.
//
// # Listeners
//
// gRPC serves the RLS, grpc.health.v1.Health (SERVING while ready) and
// reflection. [GRPCOptions] and a guard on the listener
// (Options.GRPCMaxPendingBytes) bound what a client can make it hold. Each
// address is host:port, or unix:PATH for a Unix socket. The socket's mode
// is Options.UnixSocketMode, set before any client can connect. With
// Options.TLSCertFile and TLSKeyFile, gRPC serves TLS only, beneath the
// connection guard. With TLSClientCAFile, it serves mutual TLS. HTTP
// serves as Options.HTTPTLS says. gRPC may require client certificates
// while HTTP does not. POST /json then answers 403
// (Options.HTTPJSONWithoutClientCert). Connections of both live at most
// their address's max connection age. So a client refused by a reloaded
// client CA loses its open ones too. The files are watched (package
// tlsreload), and reloaded by [Server.ReloadTLS] (SIGHUP). Files that do
// not load leave the certificate in use serving; that is logged and
// counted. With Options.Tracing, every ShouldRateLimit call and POST /json
// is a span (package tracing). Without it, nothing of tracing is on a
// decision's path.
//
// HTTP serves:
//
//	POST /json         the RLS in protojson: 200, 429 over limit; problem+json 400, 403, 413, 415, 503
//	GET  /healthz      200 while the process runs (liveness)
//	GET  /readyz       200 once the configuration is loaded and, with Redis, while Redis answers;
//	                   503 with the reason otherwise, and from the start of a shutdown
//	GET  /healthcheck  /readyz under envoyproxy/ratelimit's name
//	GET  /metrics      Prometheus, on a registry of the server's own ([Metrics])
//	GET  /rules        the configuration in use
//	GET  /debug/pprof/ runtime profiles, with Options.Pprof only; never cmdline
//	GET  /             the dashboard (package dashboard), unless Options.NoDashboard
//
// Every HTTP route answers only IP addresses, localhost and
// Options.AllowedHosts as Host; others get 421. So a page reaching the
// server by DNS rebinding reads and changes nothing. A route refuses (403)
// a request that changes something from a browser page of another origin.
// It also refuses one that a page of another site makes the browser
// fetch. At most Options.HTTPMaxConnections connections are open at once.
//
// Options.ProbeAddr, when set, serves /healthz, /readyz and /healthcheck
// alone, in plain HTTP, on connections of its own. So clients that hold
// the HTTP address's connections cannot starve the probes.
//
// # Configuration and shutdown
//
// New loads Options.ConfigPath before it binds anything. So the service
// never answers without a configuration. Run watches the path and reloads
// it when it changes, a link on the path swapped included (package
// fswatch). [Server.Reload] reloads it too. A configuration that does not
// load is logged and counted, and the one in use keeps serving.
//
// When Run's context ends, the server:
//   - reports not ready;
//   - stops accepting connections;
//   - ends the dashboard's event streams;
//   - lets requests in flight finish, for up to Options.ShutdownTimeout;
//   - leaves the live-node registry;
//   - closes the store;
//   - with tracing, exports the spans still queued, for up to 5 s.
//
// Nothing it started keeps running after Run returns.
package server
