package server

import (
	"log/slog"
	"sync"
	"time"

	redlimitprom "github.com/redlimit/redlimit/prometheus"
)

// resilientObserver is the resilient limiter's Observer: the collector's
// metrics, and the breaker's log.
type resilientObserver struct {
	*redlimitprom.Collector
	log *breakerLog
}

// BreakerChanged implements resilient.Observer.
func (o resilientObserver) BreakerChanged(from, to string, cause error) {
	o.Collector.BreakerChanged(from, to, cause)
	o.log.changed(from, to, cause)
}

// breakerLog logs the circuit breaker's changes between closed and open,
// at most one line a second. A line says why the breaker opened (the
// store's error). The failed probes of a half-open breaker, which reopen
// it at every cool-down, are counted and reported when it closes. A
// change held back by the rate is logged when the second is up.
type breakerLog struct {
	log *slog.Logger

	mu      sync.Mutex
	open    bool      // open or half-open
	changes int       // changes between closed and open not yet logged
	cause   error     // the store's error that last opened it
	since   time.Time // when it opened
	probes  int       // failed probes since it opened
	last    time.Time // of the last line
	due     bool      // a line is due at last+1s
}

// changed is told each change of the breaker (resilient.Observer's
// BreakerChanged). It runs under the breaker's lock, and logs at most a
// line a second.
func (b *breakerLog) changed(from, to string, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	switch {
	case to == "open" && from == "half-open":
		b.probes++
		return
	case to == "open":
		b.open, b.cause, b.since, b.probes = true, cause, now, 0
	case to == "closed":
		b.open = false
	default: // half-open: a probe is let through
		return
	}
	b.changes++
	if b.due {
		return
	}
	if wait := time.Second - now.Sub(b.last); wait > 0 {
		b.due = true
		time.AfterFunc(wait, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.due = false
			b.flush(time.Now())
		})
		return
	}
	b.flush(now)
}

// flush logs the changes not yet logged, if any; b.mu is held.
func (b *breakerLog) flush(now time.Time) {
	if b.changes == 0 {
		return
	}
	changes := b.changes
	b.changes, b.last = 0, now
	if b.open {
		b.log.Warn("redlimit: circuit breaker open: Redis is not asked, the failure policies answer",
			"cause", b.cause, "changes", changes)
		return
	}
	b.log.Info("redlimit: circuit breaker closed: Redis answers again",
		"open_for", now.Sub(b.since).Round(time.Millisecond), "failed_probes", b.probes, "changes", changes)
}
