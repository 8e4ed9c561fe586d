package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestRefundTokenBucketScenario is finding 4: a request of 50 on
// PerSecond(1000).TokenBucket(100) allowed at t0 and refunded, while another
// client takes 50 at t0+30ms, leaves 49 for a cost of 1, as if the
// refunded request had never come (it once left 79).
func TestRefundTokenBucketScenario(t *testing.T) {
	l := redlimit.PerSecond(1000).TokenBucket(100)
	for _, d := range standalone {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := redlimittest.NewClock(today)
			s := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(prefix(t)))
			req := []redlimit.Request{{Key: "k", Limit: l, Cost: 50}}
			mine, err := s.AllowN(ctx, "k", l, 50)
			if err != nil || !mine.Allowed {
				t.Fatalf("%+v, %v", mine, err)
			}
			clock.Advance(30 * time.Millisecond)
			if r, err := s.AllowN(ctx, "k", l, 50); err != nil || !r.Allowed {
				t.Fatalf("the other client: %+v, %v", r, err)
			}
			if err := s.RefundGroup(ctx, req, []redlimit.Result{mine}, today.UnixMicro()); err != nil {
				t.Fatal(err)
			}
			if r, err := s.Peek(ctx, "k", l, 1); err != nil || r.Remaining != 49 {
				t.Errorf("after the refund: %+v, %v; want 49 remaining", r, err)
			}
			// Refunded when nothing came in between, a request leaves no trace.
			clock.Advance(time.Second)
			at := clock.Now().UnixMicro()
			mine, err = s.AllowN(ctx, "k", l, 30)
			if err != nil || !mine.Allowed {
				t.Fatalf("%+v, %v", mine, err)
			}
			clock.Advance(5 * time.Millisecond)
			if err := s.RefundGroup(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: 30}}, []redlimit.Result{mine}, at); err != nil {
				t.Fatal(err)
			}
			if r, err := s.Peek(ctx, "k", l, 1); err != nil || r.Remaining != 99 || r.ResetAfter != 0 && r.ResetAfter != time.Millisecond {
				t.Errorf("after an undisturbed refund: %+v, %v; want a full bucket", r, err)
			}
		})
	}
}

// TestRefundNeverOverCredits runs random traffic on a key, with one request
// (the victim) allowed in the middle and refunded at the end, and compares
// the key with a model that never saw the victim: the memory store, given
// the other requests that were admitted. The refunded key is never more
// permissive than the model, never stricter than the key left unrefunded,
// and for the window algorithms and the sliding log (with few requests
// after the victim) exactly the model.
func TestRefundNeverOverCredits(t *testing.T) {
	limits := []redlimit.Limit{
		redlimit.Per(20, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(20, 100*time.Millisecond).SlidingWindow(),
		redlimit.Per(20, 100*time.Millisecond).SlidingLog(),
		redlimit.Per(200, time.Second).TokenBucket(20),
		redlimit.Per(7, time.Second).TokenBucket(5),
	}
	for _, d := range standalone {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := redlimittest.NewClock(today)
			rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(prefix(t)))
			model, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer model.Close()
			exact := 0
			for seed := range uint64(150) {
				rng := rand.New(rand.NewPCG(seed, 3))
				l := limits[seed%uint64(len(limits))]
				key := fmt.Sprint("k", seed)
				bare := key + "-unrefunded"
				// Steps of up to an eighth of the period, or for a bucket three
				// tokens' time, so that it rarely fills up in between.
				span := l.Period.Microseconds() / 8
				if l.Algorithm == redlimit.TokenBucket {
					span = 3 * l.EmissionInterval()
				}
				step := func() { clock.Advance(time.Duration(rng.Int64N(span)) * time.Microsecond) }
				// Traffic before the victim, on all three.
				for range rng.IntN(30) {
					step()
					cost := int64(1 + rng.IntN(3))
					r1, _ := rs.AllowN(ctx, key, l, cost)
					rs.AllowN(ctx, bare, l, cost)
					if r1.Allowed {
						if r2, _ := model.AllowN(ctx, key, l, cost); !r2.Allowed {
							t.Fatalf("seed %d: the model denied what Redis allowed before the victim: %+v", seed, r2)
						}
					}
				}
				step()
				victimAt := clock.Now().UnixMicro()
				victim := []redlimit.Request{{Key: key, Limit: l, Cost: int64(1 + rng.IntN(int(l.Max())))}}
				res, err := rs.AllowN(ctx, key, l, victim[0].Cost)
				if err != nil {
					t.Fatal(err)
				}
				rs.AllowN(ctx, bare, l, victim[0].Cost)
				if !res.Allowed {
					continue
				}
				// Traffic after it: what Redis admits, the model must admit too.
				after := rng.IntN(4) * rng.IntN(10)
				for range after {
					step()
					cost := int64(1 + rng.IntN(3))
					r1, _ := rs.AllowN(ctx, key, l, cost)
					if r1.Allowed {
						rs.AllowN(ctx, bare, l, cost)
						if r2, _ := model.AllowN(ctx, key, l, cost); !r2.Allowed {
							t.Fatalf("seed %d: the model denied what Redis allowed after the victim: %+v", seed, r2)
						}
					}
				}
				step()
				if err := rs.RefundGroup(ctx, victim, []redlimit.Result{res}, victimAt); err != nil {
					t.Fatal(err)
				}
				// Compare over the next two periods.
				now := clock.Now()
				for _, dt := range []time.Duration{0, l.Period / 10, l.Period / 2, l.Period, 3 * l.Period / 2} {
					clock.Set(now.Add(dt))
					for _, cost := range []int64{1, l.Max() / 2, l.Max()} {
						got, _ := rs.Peek(ctx, key, l, cost)
						want, _ := model.Peek(ctx, key, l, cost)
						none, _ := rs.Peek(ctx, bare, l, cost)
						if avail(got, cost) > avail(want, cost) || got.Allowed && !want.Allowed {
							t.Fatalf("seed %d, %s, victim of %d, %d requests after, +%s cost %d: over-credited\nrefunded %+v\nmodel    %+v", seed, l, victim[0].Cost, after, dt, cost, got, want)
						}
						if avail(got, cost) < avail(none, cost) || none.Allowed && !got.Allowed {
							t.Fatalf("seed %d, %s +%s cost %d: stricter than no refund\nrefunded %+v\nnone     %+v", seed, l, dt, cost, got, none)
						}
						if (l.Algorithm != redlimit.TokenBucket || after == 0) && got != want {
							t.Fatalf("seed %d, %s, victim of %d, %d requests after, +%s cost %d: not exact\nrefunded %+v\nmodel    %+v", seed, l, victim[0].Cost, after, dt, cost, got, want)
						}
					}
				}
				exact++
				clock.Set(now.Add(3 * l.Period))
			}
			if exact < 60 {
				t.Errorf("only %d victims were allowed and refunded", exact)
			}
		})
	}
}

// avail returns how much could pass before a request of cost, from its
// answer: Remaining counts after the request when it is allowed.
func avail(r redlimit.Result, cost int64) int64 {
	if r.Allowed {
		return r.Remaining + cost
	}
	return r.Remaining
}

// TestRefundSlidingLogBounded: a sliding-log refund rewrites the entries
// after the refunded one, up to 64 of them; with more it gives nothing
// back, which is strict.
func TestRefundSlidingLogBounded(t *testing.T) {
	l := redlimit.PerHour(1000).SlidingLog()
	for _, d := range standalone[:1] {
		ctx := context.Background()
		clock := redlimittest.NewClock(today)
		rs := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)))
		for _, after := range []int{64, 65} {
			key := fmt.Sprint(after)
			victimAt := clock.Now().UnixMicro()
			victim, err := rs.AllowN(ctx, key, l, 100)
			if err != nil || !victim.Allowed {
				t.Fatalf("%+v, %v", victim, err)
			}
			for range after {
				clock.Advance(time.Microsecond)
				if r, err := rs.AllowN(ctx, key, l, 2); err != nil || !r.Allowed {
					t.Fatalf("%+v, %v", r, err)
				}
			}
			if err := rs.RefundGroup(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: 100}}, []redlimit.Result{victim}, victimAt); err != nil {
				t.Fatal(err)
			}
			r, err := rs.Peek(ctx, key, l, 1)
			want := int64(1000 - 2*after - 1) // refunded
			if after > 64 {
				want -= 100 // too many entries to rewrite: kept
			}
			if err != nil || r.Remaining != want {
				t.Errorf("%d requests after the refunded one: %+v, %v; want %d remaining", after, r, err, want)
			}
		}
	}
}
