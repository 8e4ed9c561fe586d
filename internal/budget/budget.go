// Package budget carries the end of a store call's time budget from
// resilient to redisstore without a context of its own per call: a context
// with a deadline costs a call a timer, its done channel and a child
// registered with the caller's context (seven allocations), where the end
// of many calls can be one shared timer.
//
// resilient takes an [End] from its [Clock] for a call it makes on its
// caller's goroutine, and gives the store the caller's context with it
// ([With]); redisstore ([Of]) returns by the End as by a deadline, and by
// the caller's context's end as before.
package budget

import (
	"context"
	"sync/atomic"
	"time"
)

// End is the end of the budgets of the calls that share it: Done is closed
// at At, not before.
type End struct {
	At   time.Time
	Done <-chan struct{}
	n    int64 // At, in quanta of its Clock
}

type key struct{}

// With returns ctx carrying e.
func With(ctx context.Context, e *End) context.Context {
	return context.WithValue(ctx, key{}, e)
}

// Of returns the End ctx carries, or nil.
func Of(ctx context.Context) *End {
	e, _ := ctx.Value(key{}).(*End)
	return e
}

// Clock hands out Ends shared by the calls whose budgets end within one
// quantum of each other: one timer per quantum for all of them. Safe for
// concurrent use.
type Clock struct {
	q    int64 // the quantum, in ns
	ends [64]atomic.Pointer[End]
}

// NewClock returns a Clock of quantum q (at least 1 µs).
func NewClock(q time.Duration) *Clock {
	return &Clock{q: max(int64(q), int64(time.Microsecond))}
}

// Before returns an End at or before t and after t - q, q being c's
// quantum: a budget that ends at t ends up to a quantum early.
func (c *Clock) Before(t time.Time) *End {
	n := t.UnixNano() / c.q
	if t.UnixNano()%c.q < 0 {
		n-- // rounded down before 1970 too
	}
	slot := &c.ends[uint64(n)%uint64(len(c.ends))]
	old := slot.Load()
	if old != nil && old.n == n {
		return old
	}
	done := make(chan struct{})
	// At is t moved back to the quantum's start, keeping t's monotonic
	// reading: the timer below, and deadlines set from At, do not move
	// when the wall clock is stepped.
	e := &End{At: t.Add(-time.Duration(t.UnixNano() - n*c.q)), Done: done, n: n}
	timer := time.AfterFunc(time.Until(e.At), func() { close(done) })
	if slot.CompareAndSwap(old, e) {
		return e
	}
	// Another call put an End in the slot meanwhile: if it is of the same
	// quantum, share it; otherwise keep this one for this call alone.
	if cur := slot.Load(); cur != nil && cur.n == n && timer.Stop() {
		return cur
	}
	return e
}
