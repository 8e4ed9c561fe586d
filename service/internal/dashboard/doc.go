// Package dashboard is the live dashboard of redlimit serve. The service
// feeds its decisions to a [Recorder]. A [Handler] serves a page that
// shows them as they happen.
//
// # Feeding it
//
// The service makes one Recorder and calls, on its request path:
//
//   - [Recorder.Observe] once per limited descriptor decision, with an
//     [Event]. It holds the domain, rule path, limited key, allowed or
//     not, and shadow mode. It holds the path that decided
//     ([redlimit.Source]) and the backend latency;
//   - [Recorder.Latency] once per backend call, if the latency is not given
//     on the events: a call may decide several descriptors;
//   - [Recorder.BackendError] when a call to the backend fails, or (as
//     redlimit serve does) when a failure policy answered instead;
//   - [Recorder.SetBreakerState] when the circuit breaker changes, unless
//     RecorderOptions.BreakerState lets snapshots ask for it.
//
// All are safe for concurrent use and cheap: Observe adds to atomic
// counters sharded by CPU, and only denials touch a (sharded) lock.
//
// # What it keeps
//
// It keeps:
//   - per (domain, rule), decisions allowed, denied and shadow-denied in
//     each of the last 60 seconds, and in total;
//   - decisions by path, likewise: store, deny cache, local fallback,
//     fail-open, fail-closed;
//   - an HDR histogram of backend latency per second, with one significant
//     digit;
//   - backend errors, and the breaker's state;
//   - the most limited keys of the last one to two minutes. They are
//     counted approximately with the Space-Saving algorithm, in a fixed
//     number of counters. So a flood of distinct keys costs no memory.
//
// See [Snapshot] for the figures and their JSON.
//
// # The page and its endpoints
//
// [Handler] serves:
//
//	GET /             the page (HTML, CSS and JavaScript embedded in the binary)
//	GET /static/FILE  the page's script and style sheet
//	GET /api/stats    a Snapshot as JSON
//	GET /api/events   server-sent events: a Snapshot every second
//	GET /api/rules    the rules in use, from Options.Rules
//
// The page shows decisions per second allowed and denied: a chart of all
// rules or of the one picked, and a table per domain and rule. It shows
// the top limited keys, the decisions by path, and the backend latency
// (p50 and p99). It shows the breaker's state, backend errors and the
// loaded rules. It updates from /api/events, and polls /api/stats if event
// streams fail. It loads nothing from elsewhere (no CDN, no fonts), so it
// works offline. Its Content-Security-Policy allows only its own scripts.
//
// Its "try a request" form takes a domain, descriptor entries and
// hits_addend. Entries are key=value lines; a blank line starts another
// descriptor. It POSTs the RateLimitRequest in protojson to the service's
// /json endpoint (Options.JSONPath). It shows the overall code, the status
// of each descriptor and the response headers.
//
// # Serving it
//
// The handler holds no goroutines of its own. Each event stream is one
// request. It ends when its client goes away or Options.Done is closed.
// Streams extend their write deadline before each write. So a server's
// WriteTimeout does not cut them.
package dashboard
