package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// The tests of this file check debits (redlimit.Request.Debit) on Redis
// against the figures DEBITS.md's rules give, worked out by hand: a debit
// is counted whether it fits or not, up to the saturation bounds, and its
// result describes the key after it.

const us = time.Microsecond

// debitKeys is a store on deployment d with an explicit clock at start, and
// a prefix of its own; Redis keeps keys a day longer than the explicit
// times say, so that steps of the clock find the state the times say.
type debitKeys struct {
	t     *testing.T
	d     deployment
	s     *redisstore.Store
	clock *redlimittest.Clock
	p     string
}

func newDebitKeys(t *testing.T, d deployment, start time.Time) *debitKeys {
	t.Helper()
	k := &debitKeys{t: t, d: d, clock: redlimittest.NewClock(start), p: prefix(t)}
	k.s = d.store(t, redisstore.WithClock(k.clock.Now), redisstore.WithTTLMargin(24*time.Hour), redisstore.WithPrefix(k.p))
	return k
}

// decide makes one request: a debit through AllowAll, an admission
// through AllowN. It fails the test on an error or when the decision and
// the result disagree.
func (k *debitKeys) decide(key string, l redlimit.Limit, cost int64, debit bool) redlimit.Result {
	k.t.Helper()
	ctx := context.Background()
	if !debit {
		r, err := k.s.AllowN(ctx, key, l, cost)
		if err != nil {
			k.t.Fatalf("AllowN(%s, %s, %d): %v", key, l, cost, err)
		}
		return r
	}
	dec, err := k.s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: cost, Debit: true}})
	if err != nil {
		k.t.Fatalf("debit(%s, %s, %d): %v", key, l, cost, err)
	}
	if len(dec.Results) != 1 || dec.Allowed != dec.Results[0].Allowed {
		k.t.Fatalf("debit(%s, %s, %d): %+v: want one result, as allowed as the decision", key, l, cost, dec)
	}
	return dec.Results[0]
}

// redisKey returns the Redis key of l for id.
func (k *debitKeys) redisKey(id string, l redlimit.Limit) string {
	codes := map[redlimit.Algorithm]string{redlimit.FixedWindow: "fw", redlimit.SlidingLog: "sl", redlimit.SlidingWindow: "sw", redlimit.TokenBucket: "tb"}
	return fmt.Sprintf("%s{%s}:%s:%d", k.p, id, codes[l.Algorithm], l.Period.Microseconds())
}

// windowCount returns the count of window w of a window algorithm's key.
func (k *debitKeys) windowCount(id string, l redlimit.Limit, w int64) int64 {
	k.t.Helper()
	key := k.redisKey(id, l)
	return atoi(k.t, k.d.do(k.t, key, "EVAL", "return tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')", "1", key, strconv.FormatInt(w, 10)))
}

// logState returns the number of members of a sliding log's sorted set and
// its newest member's cum.
func (k *debitKeys) logState(id string, l redlimit.Limit) (card, total int64) {
	k.t.Helper()
	key := k.redisKey(id, l)
	out := k.d.do(k.t, key, "EVAL", "return { redis.call('ZCARD', KEYS[1]), redis.call('ZRANGE', KEYS[1], -1, -1)[1] }", "1", key)
	f := strings.Fields(out)
	if len(f) != 2 {
		k.t.Fatalf("sorted set %s: %q", key, out)
	}
	return atoi(k.t, f[0]), atoi(k.t, f[1])
}

// tat returns a token bucket's stored TAT.
func (k *debitKeys) tat(id string, l redlimit.Limit) int64 {
	k.t.Helper()
	key := k.redisKey(id, l)
	return atoi(k.t, k.d.do(k.t, key, "GET", key))
}

// debitStep is one request of a step table: the clock moves by after (back
// if negative), then the request is made and must get want (whose Limit is
// filled in from the limit).
type debitStep struct {
	after time.Duration
	debit bool
	cost  int64
	want  redlimit.Result
}

func allowedRes(rem int64, reset time.Duration) redlimit.Result {
	return redlimit.Result{Allowed: true, Remaining: rem, ResetAfter: reset}
}

func deniedRes(rem int64, retry, reset time.Duration) redlimit.Result {
	return redlimit.Result{Remaining: rem, RetryAfter: retry, ResetAfter: reset}
}

// runDebitSteps runs steps on a new key of l on every deployment, from
// start.
func runDebitSteps(t *testing.T, name string, start time.Time, l redlimit.Limit, steps []debitStep) {
	for _, d := range deployments {
		t.Run(d.name+"/"+name, func(t *testing.T) {
			t.Parallel()
			k := newDebitKeys(t, d, start)
			for i, st := range steps {
				k.clock.Advance(st.after)
				got := k.decide("k", l, st.cost, st.debit)
				want := st.want
				want.Max = l.Max()
				if got != want {
					kind := "admission"
					if st.debit {
						kind = "debit"
					}
					t.Fatalf("step %d (%s of %d on %s):\n got %+v\nwant %+v", i, kind, st.cost, l, got, want)
				}
			}
		})
	}
}

// Small limits of 10 per second; today is 1 µs into a second.
var (
	debitFW = redlimit.PerSecond(10).FixedWindow()
	debitSW = redlimit.PerSecond(10).SlidingWindow()
	debitSL = redlimit.PerSecond(10).SlidingLog()
	debitTB = redlimit.PerSecond(10).TokenBucket(10) // one token per 100 ms
)

// TestDebitIntoDebtThenDrained: on each algorithm, a debit that fits is
// counted as an admission would be; one that does not fit (or costs more
// than the limit) is counted too and takes the key into debt, and
// admissions are denied, with the exact retry-after, until it has
// drained.
func TestDebitIntoDebtThenDrained(t *testing.T) {
	never := redlimit.Never
	runDebitSteps(t, "fixed_window", today, debitFW, []debitStep{
		{0, true, 9, allowedRes(1, 999_999*us)},
		{0, true, 9, deniedRes(0, 999_999*us, 999_999*us)}, // 18 counted
		{0, false, 1, deniedRes(0, 999_999*us, 999_999*us)},
		{0, true, 25, deniedRes(0, never, 999_999*us)}, // 43
		{999_998 * us, false, 1, deniedRes(0, 1*us, 1*us)},
		{1 * us, false, 1, allowedRes(9, time.Second)},
	})
	runDebitSteps(t, "sliding_window", today, debitSW, []debitStep{
		{0, true, 9, allowedRes(1, 1_999_999*us)},
		// 18 in the window: a cost of 9 passes when it weighs 1, at
		// 2 s - floor(1 s/18) from the window's start.
		{0, true, 9, deniedRes(0, 1_944_444*us, 1_999_999*us)},
		{0, false, 1, deniedRes(0, 1_499_999*us, 1_999_999*us)},
		// The next window, 1 µs before the 18 weigh 9.
		{1_499_998 * us, false, 1, deniedRes(0, 1*us, 500_001*us)},
		{1 * us, false, 1, allowedRes(0, 1_500_000*us)},
	})
	runDebitSteps(t, "sliding_log", today, debitSL, []debitStep{
		{0, true, 9, allowedRes(1, time.Second)},
		// 18 live: a cost of 9 waits for the 17th unit, the new entry's.
		{1 * us, true, 9, deniedRes(0, time.Second, time.Second)},
		{0, false, 1, deniedRes(0, 999_999*us, time.Second)},
		// 43 live: the first entry is merged into the second (34 units
		// after it), and the decisions stay those of the exact log.
		{0, true, 25, deniedRes(0, never, time.Second)},
		{0, false, 1, deniedRes(0, time.Second, time.Second)},
		{999_999 * us, false, 1, deniedRes(0, 1*us, 1*us)},
		{1 * us, false, 1, allowedRes(9, time.Second)},
	})
	runDebitSteps(t, "token_bucket", today, debitTB, []debitStep{
		{0, true, 9, allowedRes(1, 900*time.Millisecond)},
		{0, true, 9, deniedRes(0, 1700*time.Millisecond, 1800*time.Millisecond)},
		{0, false, 1, deniedRes(0, 900*time.Millisecond, 1800*time.Millisecond)},
		{0, true, 25, deniedRes(0, never, 4300*time.Millisecond)},
		{3_399_999 * us, false, 1, deniedRes(0, 1*us, 900_001*us)},
		{1 * us, false, 1, allowedRes(0, time.Second)},
	})
}

// TestDebitClockBackUnderDebt: a debit at an instant before the key's state
// (a clock that went back) is counted where an admission would be: in the
// key's later window, at the log's newest instant, on the bucket's TAT;
// and a TAT already past the bound is never lowered.
func TestDebitClockBackUnderDebt(t *testing.T) {
	never := redlimit.Never
	back := -500 * time.Millisecond
	runDebitSteps(t, "fixed_window", today, debitFW, []debitStep{
		{0, true, 15, deniedRes(0, never, 999_999*us)},
		{back, true, 1, deniedRes(0, 1_499_999*us, 1_499_999*us)}, // 16 in the later window
		{0, false, 1, deniedRes(0, 1_499_999*us, 1_499_999*us)},
	})
	runDebitSteps(t, "sliding_window", today, debitSW, []debitStep{
		{0, true, 15, deniedRes(0, never, 1_999_999*us)},
		// 16 in the later window, entered at its start: a cost of 1 waits
		// until they weigh 9, 2 s - floor(9 s/16) after its start.
		{back, true, 1, deniedRes(0, 1_937_499*us, 2_499_999*us)},
	})
	runDebitSteps(t, "sliding_log", today, debitSL, []debitStep{
		{0, true, 15, deniedRes(0, never, time.Second)},
		// Stamped at the newest instant, 500 ms later than now.
		{back, true, 1, deniedRes(0, 1500*time.Millisecond, 1500*time.Millisecond)},
		{0, false, 1, deniedRes(0, 1500*time.Millisecond, 1500*time.Millisecond)},
	})
	runDebitSteps(t, "token_bucket", today, debitTB, []debitStep{
		{0, true, 15, deniedRes(0, never, 1500*time.Millisecond)},
		{back, true, 1, deniedRes(0, 1200*time.Millisecond, 2100*time.Millisecond)},
	})
	// A TAT at the bound (tau + MaxPeriod ahead), then the clock goes back
	// a second: a debit adds nothing, and the TAT stays.
	bound := time.Second + redlimit.MaxPeriod
	runDebitSteps(t, "token_bucket_at_bound", today, debitTB, []debitStep{
		{0, true, redlimit.MaxCost, deniedRes(0, never, bound)},
		{-time.Second, true, 1, deniedRes(0, bound+100*time.Millisecond, bound+time.Second)},
		{0, true, redlimit.MaxCost, deniedRes(0, never, bound+time.Second)},
		{time.Second, false, 1, deniedRes(0, redlimit.MaxPeriod+100*time.Millisecond, bound)},
	})
}

// TestDebitMixedWithAdmissions: in one decision, admissions are counted
// only if every request fits, debits whatever the others say, on one
// server and on Cluster when every key has one hash tag (one script call).
func TestDebitMixedWithAdmissions(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			k := newDebitKeys(t, d, today)
			ctx := context.Background()
			fw, sl, tb := redlimit.PerHour(10).FixedWindow(), redlimit.PerHour(10).SlidingLog(), redlimit.PerHour(10).TokenBucket(10)
			decide := func(want bool, reqs ...redlimit.Request) redlimit.Decision {
				t.Helper()
				dec, err := k.s.AllowAll(ctx, reqs)
				if err != nil || dec.Allowed != want {
					t.Fatalf("AllowAll(%+v): %+v, %v; want allowed %v", reqs, dec, err, want)
				}
				return dec
			}
			left := func(l redlimit.Limit, n int64) {
				t.Helper()
				checkLeft(t, k.s, "u", l, n)
			}
			// Both fit: both counted.
			decide(true, redlimit.Request{Key: "u", Limit: fw, Cost: 4}, redlimit.Request{Key: "u", Limit: sl, Cost: 8, Debit: true})
			left(fw, 6)
			left(sl, 2)
			// The debit does not fit: the admission is not counted, the debit is.
			dec := decide(false, redlimit.Request{Key: "u", Limit: fw, Cost: 4}, redlimit.Request{Key: "u", Limit: sl, Cost: 8, Debit: true})
			if a, b := dec.Results[0], dec.Results[1]; !a.Allowed || a.Remaining != 2 || b.Allowed || b.Remaining != 0 || b.RetryAfter <= 0 {
				t.Errorf("results %+v, %+v: want the admission's peek (2 left after it) and the debit not fitting", a, b)
			}
			left(fw, 6)
			if r, err := k.s.Peek(ctx, "u", sl, 1); err != nil || r.Allowed {
				t.Errorf("the log after a debit of 16 on 10: %+v, %v; want denied", r, err)
			}
			// The admission can never fit: the debit, which fits, is counted.
			dec = decide(false, redlimit.Request{Key: "u", Limit: fw, Cost: 11}, redlimit.Request{Key: "u", Limit: tb, Cost: 3, Debit: true})
			if b := dec.Results[1]; !b.Allowed || b.Remaining != 7 {
				t.Errorf("debit's result %+v: want it fit, 7 left", b)
			}
			left(fw, 6)
			left(tb, 7)
		})
	}
}

// TestDebitShardedRefundKeepsDebits: on Cluster, a decision split into
// groups by hash tag counts the debits of every group; when a group
// denies, the admissions of the groups that allowed are refunded, never
// their debits, and the decision stays a denial.
func TestDebitShardedRefundKeepsDebits(t *testing.T) {
	for _, d := range deployments[2:] {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			k := newDebitKeys(t, d, today)
			ctx := context.Background()
			fw, sl, tb := redlimit.PerHour(10).FixedWindow(), redlimit.PerHour(10).SlidingLog(), redlimit.PerHour(10).TokenBucket(10)
			exhaust(t, k.s) // "a" denies
			dec, err := k.s.AllowAll(ctx, []redlimit.Request{
				{Key: "x", Limit: fw, Cost: 2},
				{Key: "x", Limit: sl, Cost: 3, Debit: true},
				{Key: "a", Limit: limA, Cost: 1},
				{Key: "y", Limit: tb, Cost: 4, Debit: true},
			})
			if err != nil || dec.Allowed {
				t.Fatalf("%+v, %v; want a denial", dec, err)
			}
			checkLeft(t, k.s, "x", fw, 10) // refunded
			checkLeft(t, k.s, "x", sl, 7)  // kept
			checkLeft(t, k.s, "y", tb, 6)  // kept
			// A group whose debit does not fit denies; the other group's
			// admission is refunded, the debit counted.
			dec, err = k.s.AllowAll(ctx, []redlimit.Request{
				{Key: "x", Limit: fw, Cost: 1},
				{Key: "y", Limit: tb, Cost: 9, Debit: true},
			})
			if err != nil || dec.Allowed || dec.Results[1].Allowed {
				t.Fatalf("%+v, %v; want a denial by the debit", dec, err)
			}
			checkLeft(t, k.s, "x", fw, 10)
			if r, err := k.s.Peek(ctx, "y", tb, 1); err != nil || r.Allowed || r.RetryAfter != 4*6*time.Minute {
				t.Errorf("y after debits of 13 on a burst of 10: %+v, %v; want 4 tokens to wait for", r, err)
			}
		})
	}
}

// TestDebitSaturation: the largest debits at the largest count and period
// of each algorithm are counted up to the bounds of DEBITS.md, exactly,
// and a debit at the bound adds nothing: a window's count stops at
// Count + MaxCost, a log's live units too, a bucket's TAT at now + tau +
// MaxPeriod. The bucket of one token per MaxPeriod has n*ei near 2^88.
func TestDebitSaturation(t *testing.T) {
	const maxCost = redlimit.MaxCost
	for _, d := range deployments {
		for _, start := range []time.Time{today, y2100} {
			t.Run(fmt.Sprintf("%s/%d", d.name, start.Year()), func(t *testing.T) {
				t.Parallel()
				k := newDebitKeys(t, d, start)
				now := start.UnixMicro()
				W := redlimit.MaxPeriod.Microseconds()
				check := func(what string, got, want redlimit.Result) {
					t.Helper()
					if got != want {
						t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
					}
				}
				res := func(ok bool, rem int64, retry, reset int64) redlimit.Result {
					r := redlimit.Result{Allowed: ok, Max: redlimit.MaxCount, Remaining: rem, RetryAfter: time.Duration(retry) * us, ResetAfter: time.Duration(reset) * us}
					if retry < 0 {
						r.RetryAfter = redlimit.Never
					}
					return r
				}

				// Windows: count MaxCost (fits), 2*MaxCost, then nothing more.
				w := now / W
				left := (w+1)*W - now
				fw := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).FixedWindow()
				check("fixed window, first", k.decide("k", fw, maxCost, true), res(true, 0, 0, left))
				for i := range 2 {
					check(fmt.Sprintf("fixed window, debit %d", i+2), k.decide("k", fw, maxCost, true), res(false, 0, left, left))
					if c := k.windowCount("k", fw, w); c != 2*maxCost {
						t.Errorf("fixed window count %d, want %d", c, 2*maxCost)
					}
				}
				sw := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).SlidingWindow()
				check("sliding window, first", k.decide("k", sw, maxCost, true), res(true, 0, 0, (w+2)*W-now))
				for i := range 2 {
					check(fmt.Sprintf("sliding window, debit %d", i+2), k.decide("k", sw, maxCost, true), res(false, 0, (w+2)*W-now, (w+2)*W-now))
					if c := k.windowCount("k", sw, w); c != 2*maxCost {
						t.Errorf("sliding window count %d, want %d", c, 2*maxCost)
					}
				}

				// Log: MaxCost (more than the count), then MaxLogCount more
				// (the bound), merged into one entry, then nothing.
				sl := redlimit.Per(redlimit.MaxLogCount, redlimit.MaxPeriod).SlidingLog()
				logRes := func(retry, reset int64) redlimit.Result {
					r := res(false, 0, retry, reset)
					r.Max = redlimit.MaxLogCount
					return r
				}
				check("log, first", k.decide("k", sl, maxCost, true), logRes(-1, W))
				k.clock.Advance(us)
				check("log, second", k.decide("k", sl, maxCost, true), logRes(-1, W))
				k.clock.Advance(us)
				check("log, third", k.decide("k", sl, maxCost, true), logRes(-1, W-1))
				if card, total := k.logState("k", sl); card != 2 || total != maxCost+redlimit.MaxLogCount {
					t.Errorf("log: %d members, %d units; want the base and one entry of %d", card, total, maxCost+redlimit.MaxLogCount)
				}
				check("log, peek", k.decide("k", sl, 1, false), logRes(W-1, W-1))

				// Buckets: the largest, and the one whose n*ei passes 2^53.
				tb := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount)
				tau := tb.Burst * tb.EmissionInterval()
				check("bucket, first", k.decide("k", tb, maxCost, true), res(true, 0, 0, tau))
				for i := range 2 {
					check(fmt.Sprintf("bucket, debit %d", i+2), k.decide("k", tb, maxCost, true), res(false, 0, tau+W, tau+W))
					if got := k.tat("k", tb); got != k.clock.Now().UnixMicro()+tau+W {
						t.Errorf("bucket TAT %d, want now + tau + MaxPeriod = %d", got, k.clock.Now().UnixMicro()+tau+W)
					}
				}
				one := redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1)
				oneRes := func(retry, reset int64) redlimit.Result {
					r := res(false, 0, retry, reset)
					r.Max = 1
					return r
				}
				check("slow bucket", k.decide("slow", one, maxCost, true), oneRes(-1, 2*W))
				check("slow bucket, again", k.decide("slow", one, maxCost, true), oneRes(-1, 2*W))
				check("slow bucket, peek", k.decide("slow", one, 1, false), oneRes(2*W, 2*W))
				if got := k.tat("slow", one); got != k.clock.Now().UnixMicro()+2*W {
					t.Errorf("slow bucket TAT %d, want now + 2 MaxPeriod", got)
				}
			})
		}
	}
}

// TestDebitLimitChangedUnderDebt: the bounds use the request's limit at
// the time of the debit: a count raised under debt lets a debit add up to
// the new bound, one lowered adds nothing above it.
func TestDebitLimitChangedUnderDebt(t *testing.T) {
	const maxCost = redlimit.MaxCost
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			k := newDebitKeys(t, d, today)
			W := time.Hour.Microseconds()
			w := today.UnixMicro() / W
			for _, alg := range []redlimit.Algorithm{redlimit.FixedWindow, redlimit.SlidingWindow, redlimit.SlidingLog} {
				per := func(n int64) redlimit.Limit { l := redlimit.PerHour(n); l.Algorithm = alg; return l }
				count := func() int64 {
					if alg == redlimit.SlidingLog {
						_, total := k.logState("k", per(1))
						return total
					}
					return k.windowCount("k", per(1), w)
				}
				for _, st := range []struct {
					count, cost, want int64
				}{
					{10, 15, 15},
					{20, maxCost, maxCost + 15}, // all of it: the bound is 20 + MaxCost
					{5, 100, maxCost + 15},      // above 5 + MaxCost already: nothing
					{30, 100, maxCost + 30},     // up to 30 + MaxCost
					{30, 1, maxCost + 30},       // at the bound: nothing
					{redlimit.MaxLogCount, 1, maxCost + 31},
				} {
					r := k.decide("k", per(st.count), st.cost, true)
					if r.Allowed || r.Remaining != 0 {
						t.Errorf("%s: debit %d on %d: %+v; want denied, nothing left", alg, st.cost, st.count, r)
					}
					if c := count(); c != st.want {
						t.Errorf("%s: debit %d on %d: count %d, want %d", alg, st.cost, st.count, c, st.want)
					}
				}
			}
			// A bucket's bound moves with its burst: tau + MaxPeriod ahead.
			small, big := redlimit.PerHour(10).TokenBucket(1), redlimit.PerHour(10).TokenBucket(100)
			ei := small.EmissionInterval()
			now := today.UnixMicro()
			k.decide("k", small, maxCost, true)
			if got := k.tat("k", small); got != now+ei+redlimit.MaxPeriod.Microseconds() {
				t.Errorf("TAT %d after MaxCost on burst 1, want now + ei + MaxPeriod", got-now)
			}
			k.decide("k", big, maxCost, true)
			if got := k.tat("k", big); got != now+100*ei+redlimit.MaxPeriod.Microseconds() {
				t.Errorf("TAT %d after MaxCost on burst 100, want now + 100 ei + MaxPeriod", got-now)
			}
			k.decide("k", small, 1, true)
			if got := k.tat("k", big); got != now+100*ei+redlimit.MaxPeriod.Microseconds() {
				t.Errorf("TAT %d after a debit on burst 1 again, want it kept (never lowered)", got-now)
			}
		})
	}
}

// TestDebitFloodKeepsLogBounded: 100,000 debits of cost 1, each a
// microsecond after the last, on one sliding log of 100 per hour: every
// one is counted, the sorted set never holds more than 2*Count+3 members
// (the merging of DEBITS.md), and the retry-after is still that of the
// exact log. The debits run the decision script with the arguments
// AllowAll gives it, pipelined 1,000 at a time, so the test takes seconds.
func TestDebitFloodKeepsLogBounded(t *testing.T) {
	const count, debits, batch = 100, 100_000, 1000
	// One server: the script is the same on Cluster.
	for _, d := range deployments[:1] {
		t.Run(d.name, func(t *testing.T) {
			k := newDebitKeys(t, d, today)
			ctx := context.Background()
			client, script := decisionScript(t, d)
			l := redlimit.PerHour(count).SlidingLog()
			req := []redlimit.Request{{Key: "k", Limit: l, Cost: 1, Debit: true}}
			t0 := today.UnixMicro()
			for lo := 0; lo < debits; lo += batch {
				calls := make([]rueidis.LuaExec, batch)
				for i := range calls {
					calls[i].Keys, calls[i].Args = k.s.DecisionArgs(req, t0+int64(lo+i))
				}
				for i, r := range script.ExecMulti(ctx, client, calls...) {
					reply, err := r.AsIntSlice()
					if err != nil || len(reply) != 6 {
						t.Fatalf("debit %d: %v, %v", lo+i, reply, err)
					}
					if fit := lo+i < count; (reply[1] == 1) != fit {
						t.Fatalf("debit %d: %v; want allowed %v", lo+i, reply, fit)
					}
				}
				if card, total := k.logState("k", l); card > 2*count+3 || total != int64(lo+batch) {
					t.Fatalf("after debit %d: %d members, %d units; want at most %d members, %d units", lo+batch-1, card, total, 2*count+3, lo+batch)
				}
			}
			// The exact log would wait for its 99,901st unit, debited at
			// 99,900 µs.
			k.clock.Set(time.UnixMicro(t0 + debits - 1))
			r, err := k.s.Peek(ctx, "k", l, 1)
			if want := time.Hour - 99*us; err != nil || r.Allowed || r.RetryAfter != want || r.ResetAfter != time.Hour {
				t.Errorf("Peek after the flood: %+v, %v; want denied for %s, full in 1h", r, err, want)
			}
		})
	}
}
