package reserve_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/reserve"
)

// event is what a key saw, for the replay: an admission of cost at an
// instant (a reservation's cost is what it settled at), or a reset.
type event struct {
	at    time.Time
	cost  *int64 // nil for a reset
	reset bool
}

// TestSettleNeverOverCredits runs random reservations, settled below their
// estimate at random later instants (after the window moved on, too), with
// other admissions and the odd Reset in between, on one key, and replays
// what was admitted on a memory store with each reservation costing what it
// settled at: an exact account of the work done. The key is never more
// lenient than the replay, at the end and for a while after it.
func TestSettleNeverOverCredits(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(20, time.Second).FixedWindow(),
		redlimit.Per(20, time.Second).SlidingWindow(),
		redlimit.Per(20, time.Second).SlidingLog(),
		redlimit.Per(20, time.Second).TokenBucket(20),
		redlimit.Per(7, time.Second).TokenBucket(5),
	}
	for _, b := range backends[:3] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := b.make(t, uniq(), clock.Now)
			l := newLedger(t, s, reserve.Options{Now: clock.Now, Timeout: time.Hour})
			// A new seed each run explores more; a failure names it.
			seed := uint64(time.Now().UnixNano())
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d: replay with rand.NewPCG(1, seed)", seed)
				}
			})
			rng := rand.New(rand.NewPCG(1, seed))
			for run := range 40 {
				for _, lim := range limits {
					clock.Advance(time.Hour)
					key := lim.String() + "/" + time.Duration(run).String()
					var events []event
					type open struct {
						r    *reserve.Reservation
						cost *int64
					}
					var opened []open
					for range 60 {
						clock.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
						switch k := rng.IntN(20); {
						case k < 7:
							e := int64(1 + rng.IntN(8))
							r, err := l.Reserve(t.Context(), key, lim, e)
							if err != nil {
								t.Fatal(err)
							}
							if r.OK() {
								c := e
								events = append(events, event{at: clock.Now(), cost: &c})
								opened = append(opened, open{r, &c})
							}
						case k < 13 && len(opened) > 0:
							i := rng.IntN(len(opened))
							o := opened[i]
							opened = append(opened[:i], opened[i+1:]...)
							actual := rng.Int64N(*o.cost + 1)
							if err := o.r.Settle(t.Context(), actual); err != nil {
								t.Fatal(err)
							}
							*o.cost = actual
						case k < 19:
							n := int64(1 + rng.IntN(4))
							res, err := s.AllowN(t.Context(), key, lim, n)
							if err != nil {
								t.Fatal(err)
							}
							if res.Allowed {
								events = append(events, event{at: clock.Now(), cost: &n})
							}
						default:
							if rng.IntN(3) == 0 {
								if err := s.Reset(t.Context(), key, lim); err != nil {
									t.Fatal(err)
								}
								events = append(events, event{at: clock.Now(), reset: true})
							}
						}
					}
					for _, o := range opened {
						if err := o.r.Settle(t.Context(), 0); err != nil {
							t.Fatal(err)
						}
						*o.cost = 0
					}
					compareWithReplay(t, s, key, lim, events, clock)
				}
			}
		})
	}
}

// compareWithReplay replays events on a memory store and checks that s is
// never more lenient for key than the replay, from clock's time on.
func compareWithReplay(t *testing.T, s redlimit.Limiter, key string, lim redlimit.Limit, events []event, clock *redlimittest.Clock) {
	t.Helper()
	rc := redlimittest.NewClock(t0)
	replay, err := memory.New(memory.WithClock(rc.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	for i, e := range events {
		rc.Set(e.at)
		switch {
		case e.reset:
			err = replay.Reset(t.Context(), key, lim)
		case *e.cost > 0:
			var r redlimit.Result
			r, err = replay.AllowN(t.Context(), key, lim, *e.cost)
			if err == nil && !r.Allowed {
				t.Fatalf("%s: event %d: the replay denies %d, which the key admitted at a higher cost", lim, i, *e.cost)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	end := clock.Now()
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		clock.Set(end.Add(d))
		rc.Set(end.Add(d))
		for _, n := range []int64{1, 3} {
			got, err := s.Peek(t.Context(), key, lim, n)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := replay.Peek(t.Context(), key, lim, n)
			if available(got, n) > available(want, n) || got.Allowed && !want.Allowed {
				t.Fatalf("%s, %d events, end+%s, cost %d: the key answers %+v, more lenient than the replay's %+v", lim, len(events), d, n, got, want)
			}
		}
	}
	clock.Set(end)
}

// available is what a Peek of cost n says remains before the request.
func available(r redlimit.Result, n int64) int64 {
	if r.Allowed {
		return r.Remaining + n
	}
	return r.Remaining
}
