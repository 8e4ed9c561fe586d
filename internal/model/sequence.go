package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
)

// Kind is what an [Op] does.
type Kind uint8

// The kinds of operation.
const (
	// Allow is AllowN of the op's one request.
	Allow Kind = iota
	// Peek is Peek of the op's one request.
	Peek
	// Reset is Reset of the op's one request's key and limit.
	Reset
	// AllowAll decides the op's requests as one.
	AllowAll
	// Queue is Queue of the op's one request, a token bucket's, with a
	// maximum wait of one period ([redlimit.Queuer]).
	Queue
	// Unqueue gives back the latest turn queued on the op's request's
	// state, if any.
	Unqueue
	// QueueLong is Queue with the longest maximum wait, [redlimit.MaxWait].
	QueueLong
)

var kindNames = [...]string{"Allow", "Peek", "Reset", "AllowAll", "Queue", "Unqueue", "QueueLong"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Req is one request of an op: Cost units of Limit for abstract key Key,
// which the environment names ([Env.Key]); in an AllowAll, a debit if Debit
// is set ([redlimit.Request.Debit]).
type Req struct {
	Key   int
	Limit redlimit.Limit
	Cost  int64
	Debit bool
}

// Op is one call at the instant At after the sequence's start. Requests
// whose cost or limit is invalid, or an AllowAll whose requests share state,
// expect every store to return the same sentinel error.
type Op struct {
	At   time.Duration
	Kind Kind
	Reqs []Req
}

// Sequence is a run of operations over a fresh set of keys.
type Sequence struct {
	// Start is the instant At is measured from.
	Start time.Time
	Ops   []Op
}

// String lists the sequence as Go source, to paste into a regression test.
func (s Sequence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model.Sequence{Start: time.UnixMicro(%d), Ops: []model.Op{\n", s.Start.UnixMicro())
	for _, op := range s.Ops {
		fmt.Fprintf(&b, "\t%s,\n", op.goString())
	}
	b.WriteString("}}")
	return b.String()
}

func (op Op) goString() string {
	reqs := make([]string, len(op.Reqs))
	for i, r := range op.Reqs {
		reqs[i] = fmt.Sprintf("{%d, %s, %d, %v}", r.Key, limitGo(r.Limit), r.Cost, r.Debit)
	}
	return fmt.Sprintf("{%s, model.%s, []model.Req{%s}}", durGo(op.At), op.Kind, strings.Join(reqs, ", "))
}

// limitGo writes l as a Go expression.
func limitGo(l redlimit.Limit) string {
	if !l.Calendar.IsZero() {
		unit := l.Calendar.Unit.String()
		return fmt.Sprintf("redlimit.PerCalendar(%d, redlimit.%s, %q)", l.Count, strings.ToUpper(unit[:1])+unit[1:], l.Calendar.Zone)
	}
	base := fmt.Sprintf("redlimit.Per(%d, %s)", l.Count, durGo(l.Period))
	switch l.Algorithm {
	case redlimit.FixedWindow:
		return base + ".FixedWindow()"
	case redlimit.SlidingLog:
		return base + ".SlidingLog()"
	case redlimit.SlidingWindow:
		return base
	case redlimit.TokenBucket:
		return fmt.Sprintf("%s.TokenBucket(%d)", base, l.Burst)
	}
	return fmt.Sprintf("%#v", l)
}

// durGo writes d as a Go expression in the largest unit that divides it.
func durGo(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}} {
		if d != 0 && d%u.d == 0 {
			return fmt.Sprintf("%d*%s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d*time.Microsecond", d/time.Microsecond)
}

// describe writes an op for a failure's listing.
func (op Op) describe(key func(int) string) string {
	var parts []string
	for _, r := range op.Reqs {
		what := "cost"
		if r.Debit {
			what = "debit"
		}
		parts = append(parts, fmt.Sprintf("%q %s %s %d", key(r.Key), r.Limit, what, r.Cost))
	}
	return fmt.Sprintf("at %s %s %s", op.At, op.Kind, strings.Join(parts, " + "))
}

func (s Sequence) hasDebits() bool {
	for _, op := range s.Ops {
		for _, r := range op.Reqs {
			if r.Debit {
				return true
			}
		}
	}
	return false
}
