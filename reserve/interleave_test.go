package reserve_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// move is one step of an interleaving on one token bucket: after the clock
// moves by dt, an Admit of a named grant (admit), a refund of back units of
// one (refund), an AllowN (allow) or a debit.
type move struct {
	dt     time.Duration
	kind   string // "admit", "refund", "allow", "debit"
	name   string // admit, refund
	n      int64  // the cost; for a refund the units given back
	denied bool   // the step is expected to be denied
}

// TestTokenBucketRefundInterleaved refunds reservations of a token bucket
// with other reservations, their refunds and admissions in between, on
// every store, and compares the bucket with an exact replay: the same
// admissions with each grant costing what it kept. The bucket is never
// more lenient than the replay, never stricter than the bucket would be
// without the refunds, and exactly the replay where the rule for a refund
// (memory.Store.Refund) says it is.
func TestTokenBucketRefundInterleaved(t *testing.T) {
	lim := redlimit.PerSecond(100).TokenBucket(100) // a token every 10 ms
	cases := []struct {
		name  string
		moves []move
		exact bool
	}{{
		// The bucket is full again at the allow of 1: the replay has X and
		// Z cost nothing and counts that allow alone. Z's refund gave its
		// 10 back; X's refund must give nothing (it once gave 10 more).
		name: "idle at an allow after another refund",
		moves: []move{
			{0, "admit", "Z", 10, false}, {0, "admit", "X", 10, false},
			{0, "refund", "Z", 10, false},
			{120 * time.Millisecond, "allow", "", 1, false},
			{0, "refund", "X", 10, false},
		},
		exact: true,
	}, {
		// The allow found the bucket 20 ms ahead, 2 tokens: without X it
		// would have been full, so X's 10 come back as 2 (TAT y - k*ei
		// alone would give 10).
		name: "less slack than the refund at an allow",
		moves: []move{
			{0, "admit", "X", 10, false},
			{80 * time.Millisecond, "allow", "", 1, false},
			{0, "refund", "X", 10, false},
		},
		exact: true,
	}, {
		name:  "nothing in between",
		moves: []move{{0, "admit", "X", 30, false}, {5 * time.Millisecond, "refund", "X", 30, false}},
		exact: true,
	}, {
		name: "refunds in between, in order",
		moves: []move{
			{0, "admit", "X", 10, false}, {0, "admit", "Z", 10, false},
			{10 * time.Millisecond, "refund", "X", 10, false},
			{10 * time.Millisecond, "refund", "Z", 7, false},
		},
		exact: true,
	}, {
		name: "allows in between, refunded later",
		moves: []move{
			{0, "admit", "X", 10, false},
			{50 * time.Millisecond, "allow", "", 1, false},
			{40 * time.Millisecond, "refund", "X", 10, false},
		},
		exact: true,
	}, {
		// A debit took the bucket to its bound: without X it would be
		// there all the same, and X gives nothing back.
		name: "a debit to the bound in between",
		moves: []move{
			{0, "admit", "X", 10, false},
			{0, "debit", "", redlimit.MaxCost, true},
			{time.Millisecond, "refund", "X", 10, false},
		},
		exact: true,
	}, {
		// Z came after X and was refunded first: X's refund is counted
		// against Z's, and under-credits (the rule does not know Z came
		// after X).
		name: "refunds in between, last first",
		moves: []move{
			{0, "admit", "X", 10, false}, {0, "admit", "Z", 10, false},
			{10 * time.Millisecond, "refund", "Z", 10, false},
			{0, "refund", "X", 10, false},
		},
	}, {
		name: "reservations, allows, refunds and idle spells",
		moves: []move{
			{0, "admit", "A", 40, false}, {5 * time.Millisecond, "admit", "B", 30, false},
			{20 * time.Millisecond, "allow", "", 5, false}, {0, "refund", "B", 20, false},
			{30 * time.Millisecond, "admit", "C", 20, false}, {10 * time.Millisecond, "refund", "A", 35, false},
			{900 * time.Millisecond, "allow", "", 2, false}, {0, "admit", "D", 8, false},
			{0, "refund", "C", 20, false}, {5 * time.Millisecond, "refund", "D", 8, false},
		},
	}}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			bare := b.make(t, uniq(), clock.Now) // the same steps, never refunded
			for ci, c := range cases {
				clock.Advance(time.Hour)
				key := fmt.Sprint("k", ci)
				start := clock.Now()
				grants := map[string]*redlimit.Grant{}
				kept := map[string]int64{}
				at := map[string]time.Time{}
				for i, m := range c.moves {
					clock.Advance(m.dt)
					var allowed bool
					switch m.kind {
					case "admit":
						reqs := []redlimit.Request{{Key: key, Limit: lim, Cost: m.n}}
						g, err := s.Admit(t.Context(), reqs)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := bare.AllowAll(t.Context(), reqs); err != nil {
							t.Fatal(err)
						}
						grants[m.name], kept[m.name], at[m.name], allowed = g, m.n, clock.Now(), g.Allowed
					case "refund":
						if err := s.Refund(t.Context(), grants[m.name], []int64{m.n}); err != nil {
							t.Fatal(err)
						}
						kept[m.name] -= m.n
						allowed = true
					case "allow":
						r, err := s.AllowN(t.Context(), key, lim, m.n)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := bare.AllowN(t.Context(), key, lim, m.n); err != nil {
							t.Fatal(err)
						}
						allowed = r.Allowed
					case "debit":
						r, err := redlimit.Debit(t.Context(), s, key, lim, m.n)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := redlimit.Debit(t.Context(), bare, key, lim, m.n); err != nil {
							t.Fatal(err)
						}
						allowed = r.Allowed
					}
					if allowed == m.denied {
						t.Fatalf("%s: step %d (%+v): allowed %v", c.name, i, m, allowed)
					}
				}
				// The replay: every step that counted, each grant at what it
				// kept.
				rc := redlimittest.NewClock(start)
				replay, err := memory.New(memory.WithClock(rc.Now), memory.WithSweepInterval(0))
				if err != nil {
					t.Fatal(err)
				}
				defer replay.Close()
				rc.Set(start)
				for _, m := range c.moves {
					rc.Advance(m.dt)
					n := m.n
					switch m.kind {
					case "admit":
						n = kept[m.name]
					case "refund":
						continue
					}
					if n == 0 {
						continue
					}
					if m.kind == "debit" {
						_, err = redlimit.Debit(t.Context(), replay, key, lim, n)
					} else if r, e := replay.AllowN(t.Context(), key, lim, n); e == nil && !r.Allowed {
						t.Fatalf("%s: the replay denies %+v", c.name, m)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				end := clock.Now()
				for _, d := range []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
					clock.Set(end.Add(d))
					rc.Set(end.Add(d))
					for _, n := range []int64{1, 10, 50} {
						got, err := s.Peek(t.Context(), key, lim, n)
						if err != nil {
							t.Fatal(err)
						}
						want, _ := replay.Peek(t.Context(), key, lim, n)
						none, _ := bare.Peek(t.Context(), key, lim, n)
						switch {
						case lenient(got, want, n):
							t.Errorf("%s, end+%s, cost %d: more lenient than the exact replay\ngot  %+v\nwant %+v", c.name, d, n, got, want)
						case lenient(none, got, n):
							t.Errorf("%s, end+%s, cost %d: stricter than no refund\ngot  %+v\nnone %+v", c.name, d, n, got, none)
						case c.exact && got != want:
							t.Errorf("%s, end+%s, cost %d: not exact\ngot  %+v\nwant %+v", c.name, d, n, got, want)
						}
					}
				}
				clock.Set(end)
			}
		})
	}
}

// lenient reports whether a, an answer to a request of cost n, is more
// lenient than b: more available, or allowed where b is not, or denied for
// less time.
func lenient(a, b redlimit.Result, n int64) bool {
	return available(a, n) > available(b, n) || a.Allowed && !b.Allowed ||
		!a.Allowed && !b.Allowed && a.RetryAfter < b.RetryAfter
}
