package model

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redlimittest"
)

// Regression is a short sequence that failed a check: a bug, kept to show
// that its fix holds.
type Regression struct {
	Name string
	Seq  Sequence
}

const micro = time.Microsecond

// Regressions are the bugs this test found, or the known ones it was
// shown to find, as short sequences: every store, and the model, must
// pass them.
var Regressions = []Regression{
	{
		// Issue 11 finding 2: cost*T overflows int64 in the memory store.
		Name: "token bucket cost overflow",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, Allow, []Req{{0, redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(1), 29168, false}}},
		}},
	},
	{
		// Issue 11 finding 6: 10/min used up, then asked as 5/min.
		Name: "negative Remaining after a count decrease",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, Allow, []Req{{0, redlimit.PerMinute(10).FixedWindow(), 10, false}}},
			{time.Second, Allow, []Req{{0, redlimit.PerMinute(5).FixedWindow(), 1, false}}},
		}},
	},
	{
		// Issue 11 finding 6, burst: Remaining went negative, and the
		// stores disagreed (memory divided towards 0, Redis floored).
		Name: "negative Remaining after a burst decrease",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, Allow, []Req{{0, redlimit.PerSecond(2).TokenBucket(10), 10, false}}},
			{100 * time.Millisecond, Allow, []Req{{0, redlimit.PerSecond(2).TokenBucket(3), 1, false}}},
		}},
	},
	{
		// The same arithmetic as finding 6 without a limit change: the
		// clock steps back 0.5 s after a full bucket's cost, so TAT - now
		// passes the tolerance.
		Name: "negative Remaining after a clock step back",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{time.Second, Allow, []Req{{0, redlimit.PerSecond(1).TokenBucket(2), 2, false}}},
			{500 * time.Millisecond, Peek, []Req{{0, redlimit.PerSecond(1).TokenBucket(2), 1, false}}},
		}},
	},
	{
		// A clock steps back across a fixed window's boundary. The
		// request counts in the key's latest window, by the rule for a
		// clock that goes back. The later window keeps its count, so it
		// never admits its limit twice.
		Name: "memory fixed window forgets a later window after a clock step back",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{10 * time.Millisecond, Allow, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 3, false}}},
			{9999 * micro, Allow, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 1, false}}},
			{10001 * micro, Allow, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 3, false}}},
		}},
	},
	{
		// Reset deletes a key's whole state, every window included. A
		// clock step back after it finds no earlier window's count.
		Name: "reset then a clock step back",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{5 * time.Millisecond, Allow, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 3, false}}},
			{15 * time.Millisecond, Reset, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 1, false}}},
			{6 * time.Millisecond, Allow, []Req{{0, redlimit.Per(3, 10*time.Millisecond).FixedWindow(), 1, false}}},
		}},
	},
	{
		// Redis Cluster: a denied AllowAll commits and refunds the groups
		// that allowed. The commit may trim a sliding log's expired
		// entries. After a clock step back, the log still answers as the
		// other stores do.
		Name: "cluster refund keeps a sliding log's trim",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, Allow, []Req{{0, redlimit.Per(1, 100*time.Millisecond).SlidingLog(), 1, false}}},
			{100 * time.Millisecond, AllowAll, []Req{{0, redlimit.Per(1, 100*time.Millisecond).SlidingLog(), 1, false}, {1, redlimit.PerMinute(1).FixedWindow(), 2, false}}},
			{50 * time.Millisecond, Peek, []Req{{0, redlimit.Per(1, 100*time.Millisecond).SlidingLog(), 1, false}}},
		}},
	},
	{
		// An empty token bucket with a tolerance near 2^52 µs. TAT +
		// cost*T would pass 2^53, which a float64 rounds. RetryAfter must
		// match the memory store's exactly. An odd start instant makes the
		// sum odd.
		Name: "token bucket RetryAfter rounded beyond 2^53",
		Seq: Sequence{Start: redlimittest.T0.Add(micro), Ops: []Op{
			{0, Allow, []Req{{0, redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(14), 14, false}}},
			{0, Allow, []Req{{0, redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(14), 14, false}}},
		}},
	},
	{
		// Redis Cluster: the refund after a denial gives back a large
		// sliding log cost. Its work must not grow with the cost, which
		// Lua's unpack limits.
		Name: "cluster refund of a large sliding log cost",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, AllowAll, []Req{{0, redlimit.PerMinute(10000).SlidingLog(), 9000, false}, {1, redlimit.PerMinute(1).FixedWindow(), 2, false}}},
			{0, Peek, []Req{{0, redlimit.PerMinute(10000).SlidingLog(), 10000, false}}},
		}},
	},
	{
		// count * period passes 2^53: 100,000 a year does. A float64
		// product would round. A denial must name a RetryAfter at which
		// the same cost passes.
		Name: "sliding window RetryAfter at 100,000 a year",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{36201760916775 * micro, Allow, []Req{{0, redlimit.Per(100000, 8760*time.Hour), 4248, false}}},
			{37228926248805 * micro, Allow, []Req{{0, redlimit.Per(100000, 8760*time.Hour), 21795, false}}},
			{38846807488735 * micro, Allow, []Req{{0, redlimit.Per(100000, 8760*time.Hour), 31405, false}}},
			{44485055905463 * micro, Allow, []Req{{0, redlimit.Per(100000, 8760*time.Hour), 21065, false}}},
			// Denied. At its RetryAfter the same cost must pass.
			{53229391467047 * micro, Allow, []Req{{0, redlimit.Per(100000, 8760*time.Hour), 31519, false}}},
		}},
	},
	{
		// The same, after a count decrease.
		Name: "sliding window RetryAfter at a large count and period",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{0, Allow, []Req{{0, redlimit.Per(100, 216139864224155*micro), 99, false}}},
			{0, Allow, []Req{{0, redlimit.Per(10, 216139864224155*micro), 3, false}}},
		}},
	},
	{
		// After a clock step back, a token bucket's arrival time can be
		// more than the tolerance ahead of now. d + cost*T then passes
		// 2^53 (here 2^53 + 1). RetryAfter must match the memory store's
		// exactly. The tolerance is 2^52 µs, the most a limit may have.
		Name: "token bucket RetryAfter beyond 2^53 after a clock step back",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{micro, Allow, []Req{{0, redlimit.Per(1, 1<<32*micro).TokenBucket(1 << 20), 1 << 20, false}}},
			{0, Allow, []Req{{0, redlimit.Per(1, 1<<32*micro).TokenBucket(1 << 20), 1 << 20, false}}},
		}},
	},
	{
		// A count near MaxCount over a year. The reference weighs the
		// previous window exactly, as the stores do. A float64 weight
		// would answer a Remaining 1 too high.
		Name: "sliding window Remaining at a count near MaxCount",
		Seq: Sequence{Start: time.UnixMicro(1700009712802943), Ops: []Op{
			{4956 * micro, Allow, []Req{{2, redlimit.Per(1099511627775, 8760*time.Hour), 3, false}}},
			{34470287197056 * micro, AllowAll, []Req{{0, redlimit.Per(50, time.Millisecond).FixedWindow(), 1, false}, {2, redlimit.Per(1099511627775, 8760*time.Hour), 1, false}, {1, redlimit.Per(1099511627775, 8760*time.Hour), 3, false}}},
		}},
	},
	{
		// A token bucket's debit at a late instant, with a tolerance near
		// 2^52. now + tau + MaxPeriod passes 2^53 µs. The arrival time
		// stays at most 2^53 µs after the epoch, so Redis computes it
		// exactly.
		Name: "token bucket debit arrival time beyond 2^53",
		Seq: Sequence{Start: time.UnixMicro(1699999980000001), Ops: []Op{
			{2803599647370495 * micro, Allow, []Req{{0, redlimit.Per(2, 87840*time.Hour).TokenBucket(28), 3, false}}},
			{2803599647359102 * micro, AllowAll, []Req{{0, redlimit.Per(2, 87840*time.Hour).TokenBucket(28), 28, true}}},
		}},
	},
	{
		// A turn given back to a full bucket: Redis deleted the key, so a
		// clock that went back found none; memory kept its arrival time.
		Name: "unqueue to a full bucket then the clock back",
		Seq: Sequence{Start: redlimittest.T0, Ops: []Op{
			{1 * micro, Queue, []Req{{0, redlimit.Per(5, time.Hour).TokenBucket(10), 3, false}}},
			{1 * micro, Unqueue, []Req{{0, redlimit.Per(5, time.Hour).TokenBucket(10), 3, false}}},
			{-86399999512 * micro, AllowAll, []Req{{0, redlimit.Per(5, time.Hour).TokenBucket(10), 2, true}}},
		}},
	},
	{
		// 1 µs before a New York midnight, with the hosts' clock 1.28 s
		// ahead (hostSkew): Redis counted in the host's next day.
		Name: "calendar window of the host's clock",
		Seq: Sequence{Start: time.UnixMicro(1700023820392273), Ops: []Op{
			{1462230579607726 * micro, Peek, []Req{{0, redlimit.PerCalendar(1000, redlimit.Day, "America/New_York"), 8, false}}},
		}},
	},
	{
		// A turn given back after a debit that counted nothing (the
		// bucket at 2^53 µs): the check dropped the debit's stamp, not
		// the turn's, and counted the given-back turn against the next.
		Name: "unqueue after a debit at the bound",
		Seq: Sequence{Start: time.UnixMicro(1699999980000001), Ops: []Op{
			{2803599647370495 * micro, Allow, []Req{{0, redlimit.Per(3, time.Second).TokenBucket(13510771860), 13510771860, false}}},
			{2803599647370495 * micro, Queue, []Req{{0, redlimit.Per(3, time.Second).TokenBucket(13510771860), 2, false}}},
			{2803599647370495 * micro, AllowAll, []Req{{0, redlimit.Per(3, time.Second).TokenBucket(13510771860), 1, true}}},
			{2803599647370495 * micro, Unqueue, []Req{{0, redlimit.Per(3, time.Second).TokenBucket(13510771860), 2, false}}},
			{2803599647370495 * micro, QueueLong, []Req{{0, redlimit.Per(3, time.Second).TokenBucket(13510771860), 3, false}}},
		}},
	},
	{
		// A turn queued at 2^52 µs behind a bucket of the longest
		// emission interval: its TAT passed 2^53 µs, where a Lua number
		// rounds. Redis wrote one µs less than memory and the model.
		Name: "queue past 2^53 µs",
		Seq: Sequence{Start: time.UnixMicro(1700081252017868), Ops: []Op{
			{2803518375352628 * micro, Allow, []Req{{0, redlimit.Per(1, 316223999999999*time.Microsecond).TokenBucket(14), 1, false}}},
			{2803518375352628 * micro, Queue, []Req{{0, redlimit.Per(1, 316223999999999*time.Microsecond).TokenBucket(14), 14, false}}},
		}},
	},
}

// RunRegressions replays each of Regressions in a fresh Env, as a subtest;
// with opts.NoDebits, those without debits.
func RunRegressions(t *testing.T, newEnv NewEnv, opts Options) {
	for _, r := range Regressions {
		t.Run(r.Name, func(t *testing.T) {
			if opts.NoDebits && r.Seq.hasDebits() {
				t.Skip("a sequence with debits (Options.NoDebits)")
			}
			if f := Replay(newEnv(t), r.Seq); f != nil {
				t.Fatal(f)
			}
		})
	}
}
