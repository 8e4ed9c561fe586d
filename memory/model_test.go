package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/model"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// memoryEnv runs a sequence on a fresh memory store; each run has its own
// store, so the keys need no prefix.
func memoryEnv(t testing.TB) model.Env {
	return boundedEnv(nil)(t)
}

// boundedEnv returns environments whose fresh memory store has opts too,
// and reports its refusals.
func boundedEnv(opts []memory.Option) model.NewEnv {
	return func(t testing.TB) model.Env {
		clock := redlimittest.NewClock(redlimittest.T0)
		s, err := memory.New(append([]memory.Option{memory.WithClock(clock.Now), memory.WithSweepInterval(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return model.Env{
			Clock: clock,
			Targets: []model.Target{{Name: "memory", Limiter: s,
				Refused: func() uint64 { return s.Stats().Refused }, Full: memory.ErrFull}},
			Key:   func(i int) string { return fmt.Sprintf("k%d", i) },
			Close: func([]model.Touched) { s.Close() },
		}
	}
}

// FuzzModel runs operation sequences decoded from the input on the memory
// store and the reference model (see package model). Without -fuzz it runs
// the seed corpus: fixed pseudo-random sequences.
func FuzzModel(f *testing.F) {
	for _, b := range model.Seeds(1, model.SeedCount(100), 2000) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		model.Check(t, memoryEnv, data, model.Options{})
	})
}

// FuzzModelBounded is FuzzModel on a memory store of at most 1 to 16
// states and a few hundred to a few thousand bytes, with the background
// sweeper on or off: an admission or check the store has no room for is
// refused (a denial the model would allow, checked for its shape); a debit
// is counted beyond the bounds, or fails with ErrFull, counting nothing,
// but never right after a check of its state that passed; every other
// answer is the model's, since evicting idle states changes no answer.
// The clock never goes back, which would find again what was evicted.
func FuzzModelBounded(f *testing.F) {
	for i, b := range model.Seeds(6, model.SeedCount(60), 2000) {
		f.Add(uint8(i), uint16(i*997), b)
	}
	f.Fuzz(func(t *testing.T, keys uint8, bytes uint16, data []byte) {
		opts := []memory.Option{memory.WithMaxKeys(1 + int(keys%16)), memory.WithMaxBytes(200 + int64(bytes%8000))}
		if keys >= 128 {
			opts = append(opts, memory.WithSweepInterval(time.Millisecond))
		}
		model.Check(t, boundedEnv(opts), data, model.Options{NoClockBack: true})
	})
}

// TestModelRegressions replays the sequences that found bugs.
func TestModelRegressions(t *testing.T) {
	model.RunRegressions(t, memoryEnv, model.Options{})
}

// TestModelBoundedRegressions replays, on bounded stores, the sequences
// that found bugs in the model's bounded-store rules.
func TestModelBoundedRegressions(t *testing.T) {
	hour := redlimit.PerHour(10).FixedWindow()
	debit := func(key int) model.Req { return model.Req{Key: key, Limit: hour, Cost: 1, Debit: true} }
	check := model.Op{Kind: model.Peek, Reqs: []model.Req{{Key: 0, Limit: hour, Cost: 1}}}
	for _, tc := range []struct {
		name string
		opts []memory.Option
		ops  []model.Op
	}{{
		// FuzzModelBounded seed 21, when eviction missed idle states: a
		// check of a new key had room for its state, then its debit came
		// with debits of other new keys, more than debitBound holds.
		name: "checked debit with new keys' debits",
		opts: []memory.Option{memory.WithMaxKeys(1)},
		ops: []model.Op{check,
			{Kind: model.AllowAll, Reqs: []model.Req{debit(0), debit(1), debit(2)}}},
	}, {
		// The same with the check's state held and the store at
		// debitBound: a check needs no room, another debit does.
		name: "checked debit with a new key's debit at the bound",
		opts: []memory.Option{memory.WithMaxKeys(1)},
		ops: []model.Op{
			{Kind: model.AllowAll, Reqs: []model.Req{debit(0)}},
			{Kind: model.AllowAll, Reqs: []model.Req{debit(1)}},
			check,
			{Kind: model.AllowAll, Reqs: []model.Req{debit(0), debit(2)}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			seq := model.Sequence{Start: redlimittest.T0, Ops: tc.ops}
			if f := model.Replay(boundedEnv(tc.opts)(t), seq); f != nil {
				t.Fatal(f)
			}
		})
	}
}
