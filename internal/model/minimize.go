package model

import (
	"testing"
	"time"
)

// NewEnv makes a fresh Env for one run: its stores, or at least its keys,
// must not have been used by an earlier run.
type NewEnv func(t testing.TB) Env

// Check runs the sequence data decodes to in a fresh Env from newEnv. On a
// failure it fails t with it. It also gives the shortest sequence that
// still fails the same check. It finds it by replaying shorter ones, for
// at most about ten seconds.
func Check(t testing.TB, newEnv NewEnv, data []byte, opts Options) {
	t.Helper()
	f := Run(newEnv(t), data, opts)
	if f == nil {
		return
	}
	m := Minimize(t, newEnv, f, 10*time.Second)
	t.Fatalf("%v\n\nshortest sequence found that fails the same check (%d of %d operations), with %s: %s\n%s",
		f, len(m.Seq.Ops), len(f.Seq.Ops), m.Check, m.Msg, m.Seq)
}

// Minimize returns the failure of the shortest sequence it finds, within
// maxTime, that fails the same check as f. It drops runs of operations,
// halving their length down to one. It keeps each drop after which the
// check still fails.
func Minimize(t testing.TB, newEnv NewEnv, f *Failure, maxTime time.Duration) *Failure {
	deadline := time.Now().Add(maxTime)
	best := f
	for progress := true; progress && time.Now().Before(deadline); {
		progress = false
		for chunk := max(1, len(best.Seq.Ops)/2); chunk >= 1; chunk /= 2 {
			for i := 0; i < len(best.Seq.Ops) && time.Now().Before(deadline); {
				ops := best.Seq.Ops
				try := Sequence{Start: best.Seq.Start, Ops: append(append([]Op(nil), ops[:i]...), ops[min(i+chunk, len(ops)):]...)}
				if g := Replay(newEnv(t), try); g != nil && g.Check == f.Check {
					best, progress = g, true // g.Seq ends with the op that failed
					continue
				}
				i += chunk
			}
		}
	}
	return best
}
