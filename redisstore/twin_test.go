package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// twin makes every call on the memory store and on Redis at the same
// instant of one explicit clock, fails the test when the answers differ,
// and checks each answer against the invariants every Result keeps.
type twin struct {
	t       *testing.T
	clock   *redlimittest.Clock
	mem     *memory.Store
	rs      *redisstore.Store
	history []string // the calls made, printed on a failure
	// loose drops the upper bounds of RetryAfter and ResetAfter from the
	// checks: a count or burst changed under a key's state, or a clock that
	// went back, can make a key wait longer than its limit alone would.
	loose bool
}

// newTwin returns a twin on the deployment d, its clock at start. Redis
// keeps keys for a day longer than the explicit times say, so that jumps
// of the clock (forward or back) find the same state in both stores.
func newTwin(t *testing.T, d deployment, start time.Time, opts ...redisstore.Option) *twin {
	t.Helper()
	clock := redlimittest.NewClock(start)
	mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	opts = append([]redisstore.Option{redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(24 * time.Hour), redisstore.WithPrefix(prefix(t))}, opts...)
	return &twin{t: t, clock: clock, mem: mem, rs: d.store(t, opts...)}
}

func (w *twin) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\nlast calls:\n%s", fmt.Sprintf(format, args...), strings.Join(w.history[max(0, len(w.history)-20):], "\n"))
}

func (w *twin) log(format string, args ...any) {
	w.history = append(w.history, fmt.Sprintf("%d µs: ", w.clock.Now().UnixMicro())+fmt.Sprintf(format, args...))
}

// allow runs AllowN (or Peek) on both stores and returns the answer.
func (w *twin) allow(key string, l redlimit.Limit, cost int64, peek bool) redlimit.Result {
	w.t.Helper()
	ctx := context.Background()
	f1, f2 := w.mem.AllowN, w.rs.AllowN
	if peek {
		f1, f2 = w.mem.Peek, w.rs.Peek
	}
	r1, e1 := f1(ctx, key, l, cost)
	r2, e2 := f2(ctx, key, l, cost)
	w.log("%q %s cost %d peek=%v: %+v", key, l, cost, peek, r1)
	if e1 != nil || e2 != nil {
		w.fatalf("%q %s cost %d: errors %v, %v", key, l, cost, e1, e2)
	}
	if r1 != r2 {
		w.fatalf("%q %s cost %d peek=%v:\nmemory %+v\nredis  %+v", key, l, cost, peek, r1, r2)
	}
	checkResult(w.t, l, cost, r1, w.loose, w.fatalf)
	return r1
}

// allowAll runs AllowAll on both stores and returns the decision.
func (w *twin) allowAll(reqs []redlimit.Request) redlimit.Decision {
	w.t.Helper()
	ctx := context.Background()
	d1, e1 := w.mem.AllowAll(ctx, reqs)
	d2, e2 := w.rs.AllowAll(ctx, reqs)
	w.log("AllowAll %+v: %+v", reqs, d1)
	if e1 != nil || e2 != nil {
		w.fatalf("AllowAll: errors %v, %v", e1, e2)
	}
	if d1.Allowed != d2.Allowed || len(d1.Results) != len(d2.Results) {
		w.fatalf("AllowAll:\nmemory %+v\nredis  %+v", d1, d2)
	}
	for i := range d1.Results {
		if d1.Results[i] != d2.Results[i] {
			w.fatalf("AllowAll, limit %d:\nmemory %+v\nredis  %+v", i, d1, d2)
		}
		checkResult(w.t, reqs[i].Limit, reqs[i].Cost, d1.Results[i], w.loose, w.fatalf)
	}
	return d1
}

func (w *twin) reset(key string, l redlimit.Limit) {
	w.t.Helper()
	ctx := context.Background()
	e1, e2 := w.mem.Reset(ctx, key, l), w.rs.Reset(ctx, key, l)
	w.log("Reset %q %s", key, l)
	if e1 != nil || e2 != nil {
		w.fatalf("Reset: %v, %v", e1, e2)
	}
}

// checkResult fails on an answer that breaks what [redlimit.Result]
// promises for a request of cost on limit l, whatever the key's history;
// unless loose, also that it waits no longer than l alone can make it.
func checkResult(t *testing.T, l redlimit.Limit, cost int64, r redlimit.Result, loose bool, fatalf func(string, ...any)) {
	t.Helper()
	// The longest a key can take to be full again, and to admit a cost that fits.
	longest := 2 * l.Period
	if l.Algorithm == redlimit.TokenBucket {
		longest = time.Duration(l.Burst*l.EmissionInterval()) * time.Microsecond
	}
	if loose {
		longest = redlimit.Never - 1
	}
	switch {
	case r.Max != l.Max():
		fatalf("%s cost %d: Limit %d, want %d", l, cost, r.Max, l.Max())
	case r.Remaining < 0 || r.Remaining > r.Max:
		fatalf("%s cost %d: Remaining %d outside [0, %d]", l, cost, r.Remaining, r.Max)
	case r.Allowed && cost > l.Max():
		fatalf("%s: a cost of %d above %d was allowed", l, cost, l.Max())
	case r.Allowed && r.RetryAfter != 0:
		fatalf("%s cost %d: allowed with RetryAfter %s", l, cost, r.RetryAfter)
	case r.Allowed && r.Remaining > l.Max()-cost:
		fatalf("%s cost %d: allowed with %d remaining", l, cost, r.Remaining)
	case !r.Allowed && cost > l.Max() && r.RetryAfter != redlimit.Never:
		fatalf("%s cost %d: RetryAfter %s, want Never", l, cost, r.RetryAfter)
	case !r.Allowed && cost <= l.Max() && (r.RetryAfter <= 0 || r.RetryAfter > longest):
		fatalf("%s cost %d: RetryAfter %s, want in (0, %s]", l, cost, r.RetryAfter, longest)
	case !r.Allowed && cost <= r.Remaining:
		fatalf("%s cost %d: denied with %d remaining", l, cost, r.Remaining)
	case r.ResetAfter < 0 || r.ResetAfter > longest:
		fatalf("%s cost %d: ResetAfter %s outside [0, %s]", l, cost, r.ResetAfter, longest)
	}
}
