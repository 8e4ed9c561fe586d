package model

import (
	"time"

	"github.com/redlimit/redlimit"
)

// Leases is the leases of a [redlimit.Semaphore] from its definition:
// each key's lease ids with their expiry. A call first trims its key's
// leases that expired by now, as the stores document. So a clock that
// went back does not bring them back. The zero value is not usable; make
// one with Leases{}.
type Leases map[string]map[string]time.Time

// Holds reports whether key holds lease id at now.
func (m Leases) Holds(key, id string, now time.Time) bool {
	exp, ok := m[key][id]
	return ok && exp.After(now)
}

// Do runs op ("acquire", "renew" or "release") of lease id under c at
// now, and returns its answer. A new lease takes a slot if fewer than
// c.Slots are held; a held one is renewed whatever the slots.
func (m Leases) Do(op, key string, c redlimit.Concurrency, id string, now time.Time) redlimit.Lease {
	ls := m[key]
	if ls == nil {
		ls = map[string]time.Time{}
		m[key] = ls
	}
	trim(ls, now)
	_, held := ls[id]
	var l redlimit.Lease
	switch {
	case op == "release":
		delete(ls, id)
	case held || op == "acquire" && int64(len(ls)) < c.Slots:
		ls[id] = now.Add(c.TTL)
		l.Held = true
	default:
		for _, exp := range ls {
			if l.RetryAfter == 0 || exp.Sub(now) < l.RetryAfter {
				l.RetryAfter = exp.Sub(now)
			}
		}
	}
	l.InFlight = int64(len(ls))
	return l
}

// Trim deletes every key's leases that expired by now, as a store's Sweep
// does.
func (m Leases) Trim(now time.Time) {
	for _, ls := range m {
		trim(ls, now)
	}
}

// trim deletes the leases of ls that expired by now.
func trim(ls map[string]time.Time, now time.Time) {
	for id, exp := range ls {
		if !exp.After(now) {
			delete(ls, id)
		}
	}
}
