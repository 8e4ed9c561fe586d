package model_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/model"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestConformance: the model passes the suite every store passes.
func TestConformance(t *testing.T) {
	redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
		return model.New(now)
	})
}

// modelEnv runs sequences on a second Model, through wrap.
func modelEnv(wrap func(*model.Model) redlimit.Limiter) model.NewEnv {
	return func(t testing.TB) model.Env {
		clock := redlimittest.NewClock(redlimittest.T0)
		return model.Env{
			Clock:   clock,
			Targets: []model.Target{{Name: "store", Limiter: wrap(model.New(clock.Now))}},
			Key:     func(i int) string { return fmt.Sprintf("k%d", i) },
		}
	}
}

// TestModelAgreesWithItself: sequences on a second Model pass every check:
// the model is honest by its own checks.
func TestModelAgreesWithItself(t *testing.T) {
	newEnv := modelEnv(func(m *model.Model) redlimit.Limiter { return m })
	var st model.Stats
	for i, b := range model.Seeds(4, 100, 2000) {
		env := newEnv(t)
		env.Stats = &st
		if f := model.Run(env, b, model.Options{}); f != nil {
			t.Fatalf("seed %d: %v\n%s", i, f, f.Seq)
		}
	}
	t.Logf("%+v", st)
	if st.Allowed < 1000 || st.Denied < 1000 || st.Modelled < 1000 || st.Changed < 100 || st.Back < 100 || st.AllowAlls < 100 || st.Debits < 1000 || st.Queued < 100 || st.GivenBack < 20 {
		t.Errorf("the sequences did too little of something: %+v", st)
	}
}

// TestRegressions: the model passes the regression sequences on itself.
func TestRegressions(t *testing.T) {
	model.RunRegressions(t, modelEnv(func(m *model.Model) redlimit.Limiter { return m }), model.Options{})
}

// mutant is a store with one planted bug.
type mutant struct {
	*model.Model
	allowN   func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error)
	allowAll func(m *model.Model, ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error)
	queue    func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error)
}

func (m mutant) Queue(ctx context.Context, key string, l redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	if m.queue != nil {
		return m.queue(m.Model, ctx, key, l, n, maxWait)
	}
	return m.Model.Queue(ctx, key, l, n, maxWait)
}

func (m mutant) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	if m.allowN != nil {
		return m.allowN(m.Model, ctx, key, l, n)
	}
	return m.Model.AllowN(ctx, key, l, n)
}

func (m mutant) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if m.allowAll != nil {
		return m.allowAll(m.Model, ctx, reqs)
	}
	return m.Model.AllowAll(ctx, reqs)
}

// TestCatchesPlantedBugs: each planted bug fails a check within the seeded
// sequences, and the failure is replayed to a short sequence.
func TestCatchesPlantedBugs(t *testing.T) {
	mutants := []struct {
		name string
		m    mutant
	}{
		{"denied AllowAll consumes", mutant{allowAll: func(m *model.Model, ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
			d, err := m.AllowAll(ctx, reqs)
			if err == nil && !d.Allowed {
				for i, r := range reqs {
					if d.Results[i].Allowed {
						m.AllowN(ctx, r.Key, r.Limit, r.Cost)
					}
				}
			}
			return d, err
		}}},
		{"one over the limit", mutant{allowN: func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
			r, err := m.AllowN(ctx, key, l, n)
			if err == nil && !r.Allowed && n == 1 && r.Remaining == 0 && l.Algorithm == redlimit.SlidingLog {
				r.Allowed, r.RetryAfter = true, 0
			}
			return r, err
		}}},
		{"debit denied as an admission", mutant{allowAll: func(m *model.Model, ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
			admissions := make([]redlimit.Request, len(reqs))
			for i, r := range reqs {
				r.Debit = false
				admissions[i] = r
			}
			return m.AllowAll(ctx, admissions)
		}}},
		{"debit beyond its bound", mutant{allowAll: func(m *model.Model, ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
			d, err := m.AllowAll(ctx, reqs)
			for i, r := range reqs {
				if err == nil && r.Debit && !d.Results[i].Allowed && r.Cost == redlimit.MaxCost {
					m.AllowAll(ctx, []redlimit.Request{r}) // counted twice
				}
			}
			return d, err
		}}},
		{"RetryAfter 1µs short", mutant{allowN: func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
			r, err := m.AllowN(ctx, key, l, n)
			if !r.Allowed && r.RetryAfter > time.Microsecond && r.RetryAfter != redlimit.Never {
				r.RetryAfter -= time.Microsecond
			}
			return r, err
		}}},
		{"calendar month as 30 days from the epoch", mutant{allowN: func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
			if !l.Calendar.IsZero() {
				l = redlimit.Per(l.Count, 30*24*time.Hour).FixedWindow()
			}
			return m.AllowN(ctx, key, l, n)
		}}},
		{"a turn queued without its wait", mutant{queue: func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
			t, err := m.Queue(ctx, key, l, n, maxWait)
			t.Delay = 0
			return t, err
		}}},
		{"Remaining past Max", mutant{allowN: func(m *model.Model, ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
			r, err := m.AllowN(ctx, key, l, n)
			if r.Remaining == r.Max && r.Max > 0 {
				r.Remaining++
			}
			return r, err
		}}},
	}
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			newEnv := modelEnv(func(m *model.Model) redlimit.Limiter { mu.m.Model = m; return mu.m })
			for _, b := range model.Seeds(5, 100, 2000) {
				if f := model.Run(newEnv(t), b, model.Options{}); f != nil {
					short := model.Minimize(t, newEnv, f, 5*time.Second)
					if short.Check != f.Check || len(short.Seq.Ops) > len(f.Seq.Ops) {
						t.Errorf("minimized to %s with %d ops, from %s with %d", short.Check, len(short.Seq.Ops), f.Check, len(f.Seq.Ops))
					}
					if g := model.Replay(newEnv(t), short.Seq); g == nil || g.Check != f.Check {
						t.Errorf("the short sequence does not fail again: %v", g)
					}
					t.Logf("caught by %q in %d ops (%d after minimizing): %s", f.Check, len(f.Seq.Ops), len(short.Seq.Ops), short.Msg)
					return
				}
			}
			t.Error("no sequence caught it")
		})
	}
}
