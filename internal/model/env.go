package model

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redlimittest"
)

// Target is a store under test.
type Target struct {
	Name    string
	Limiter redlimit.Limiter
	// Split says an AllowAll over several keys is decided per key, and
	// what it consumed is refunded if one denied (Redis Cluster). Its
	// refund of a token bucket that was full leaves the theoretical
	// arrival time at the decision's instant. The others leave it before
	// (see redisstore's refund). Until a later admission, a clock that
	// then goes back finds the bucket stricter there. The run then stops
	// comparing that target's answers for the bucket with the others'.
	Split bool
	// Refused, if set, returns how many requests the store has refused for
	// want of room: a bounded memory store. A request refused during an
	// operation is a denial where the model allows. It is checked for the
	// refusal's shape, not against the model.
	Refused func() uint64
	// Full, if set, is the error a bounded store returns for a decision
	// whose debits it has no room for: the decision counted nothing. A
	// debit right after a check (Peek) of its state that passed, the only
	// debit of its decision, must not get it. Only for an Env of one
	// target.
	Full error
}

// Env is where one sequence runs: stores that read Clock, and the names of
// the sequence's keys. The first target is the reference the others are
// compared with; it may not be Split. Every run needs an Env of its own, with keys no
// earlier run used, since the stores keep what a run left behind.
type Env struct {
	Clock *redlimittest.Clock
	// HostClock, if set, is the clock a store reads for its own calendar
	// arithmetic, apart from the Clock it decides by (redisstore: this
	// host's, and Redis's). The run sets it skewed from Clock (hostSkew),
	// so that a calendar boundary sometimes lies between them; the
	// answers must not change.
	HostClock *redlimittest.Clock
	Targets   []Target
	// Key names abstract key i (0..3).
	Key func(i int) string
	// Close, if set, is called after the run with the states it touched
	// (to delete them from a shared server).
	Close func(touched []Touched)
	// Stats, if set, accumulates what the run did.
	Stats *Stats
}

// Stats counts what runs did, to show that the checks were exercised.
type Stats struct {
	Ops       int // operations run
	Refused   int // operations every store refused with an error
	Allowed   int // results allowed
	Denied    int // results denied
	Never     int // denials that can never pass
	Modelled  int // results compared with the model
	Changed   int // results on a state whose limit changed
	Back      int // results on a state whose clock stepped back
	Probes    int // answers asked for at the instants results named
	AllowAlls int // AllowAll decisions of two limits or more
	Refusals  int // results a bounded store refused for want of room
	Full      int // decisions a bounded store failed with Target.Full
	Split     int // results a Split target was not compared on
	Debits    int // results of debits
	Queued    int // turns queued to wait (Queue with a delay)
	GivenBack int // turns given back (Unqueue)
	Skewed    int // operations with a calendar boundary between HostClock and Clock
}

// Touched is a state a run wrote.
type Touched struct {
	Key   string
	Limit redlimit.Limit
}

// Failure is the first check a run failed.
type Failure struct {
	// Check names the kind of check: "stores differ", "model", "invariant",
	// "retry-after", "reset-after", "atomic", "admitted", "error".
	Check string
	Msg   string
	// Seq is the run's operations up to and including the failing one.
	Seq Sequence
	// Trace describes the last operations and their answers.
	Trace []string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s: %s\nlast operations:\n%s", f.Check, f.Msg, strings.Join(f.Trace, "\n"))
}
