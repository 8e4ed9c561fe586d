package server

import (
	"sync/atomic"
	"time"
)

// throttle lets at most one log line a second through, so that a flood
// of failures does not flood the log; the metrics count every one. It
// counts the lines held back, for the next line to report. Its zero value
// is ready; it is safe for concurrent use.
type throttle struct {
	last atomic.Int64 // unix nanoseconds of the last line let through
	held atomic.Int64 // lines held back since
}

// allow reports whether a line may be logged now, and how many were held
// back since the last one let through.
func (t *throttle) allow() (ok bool, held int64) {
	now := time.Now().UnixNano()
	last := t.last.Load()
	if now-last < int64(time.Second) || !t.last.CompareAndSwap(last, now) {
		t.held.Add(1)
		return false, 0
	}
	return true, t.held.Swap(0)
}
