package reserve

import "time"

// ReleaseExpired releases the reservations due at the Ledger's clock now,
// as its goroutine does, and returns how long until the next one is due.
func (l *Ledger) ReleaseExpired() time.Duration { return l.releaseExpired() }
