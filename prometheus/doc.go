// Package redlimitprom exports what a [resilient.Limiter] does as
// Prometheus metrics, so that a program using httplimit or grpclimit sees
// what the redlimit service shows. It is a module of its own, so that the
// library does not depend on Prometheus.
//
//	reg := prometheus.NewRegistry()
//	c, err := redlimitprom.New(reg, redlimitprom.Options{})
//	...
//	l, err := resilient.New(store, resilient.Options{Nodes: registry, Observer: c})
//	...
//	c.Watch(l) // the reconciliation's counts
//
// # Metrics
//
// The names are the service's where the meaning is the same (marked *).
//
//	redlimit_decisions_total{outcome,source}  limits decided (one per limit of a decision): outcome allowed or
//	                                          denied; source the path that decided: store, deny_cache, local,
//	                                          fail_open, fail_closed, undecided. The failure policies' decisions
//	                                          (local, fail_open, fail_closed) are the fallback's.
//	redlimit_store_duration_seconds           time the limiter waited for one call to the store (Redis),
//	                                          failed calls included
//	redlimit_store_errors_total               calls to the store that failed or did not answer in time
//	redlimit_breaker_state{state} *           1 for the circuit breaker's state: closed, open, half-open
//	redlimit_breaker_changes_total{from,to}   changes of the breaker's state
//	redlimit_reconcile_pending                states whose units, counted locally during an outage, wait to be
//	                                          charged to the store (after Watch)
//	redlimit_reconcile_units_total{result}    those units by what became of them: charged, unconfirmed, dropped,
//	                                          expired (see resilient.Reconciliation; after Watch)
//
// The service's own metrics (redlimit_rls_*, redlimit_backend_*) count its
// requests and descriptors; the service exports these too, with Redis.
//
// Several limiters on one registry need [Options.ConstLabels] to tell
// their series apart.
package redlimitprom
