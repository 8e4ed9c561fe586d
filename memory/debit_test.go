package memory_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

const us = time.Microsecond

// debitStep is a debit (or an admission, or a Peek) at T0+at and its answer.
type debitStep struct {
	at   time.Duration
	kind string // "debit", "allow", "peek"
	l    redlimit.Limit
	cost int64
	want redlimit.Result
}

// runDebitSteps runs steps on key of a fresh store and checks each answer.
func runDebitSteps(t *testing.T, steps []debitStep) *memory.Store {
	t.Helper()
	clock := redlimittest.NewClock(redlimittest.T0)
	s, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for i, st := range steps {
		clock.Set(redlimittest.T0.Add(st.at))
		var got redlimit.Result
		switch st.kind {
		case "debit":
			got, err = redlimit.Debit(ctx, s, "k", st.l, st.cost)
		case "allow":
			got, err = s.AllowN(ctx, "k", st.l, st.cost)
		default:
			got, err = s.Peek(ctx, "k", st.l, st.cost)
		}
		st.want.Max = st.l.Max()
		if err != nil || got != st.want {
			t.Errorf("step %d: %s %s cost %d at T0%+v:\n got %+v, %v\nwant %+v", i, st.kind, st.l, st.cost, st.at, got, err, st.want)
		}
	}
	return s
}

func ok(rem int64, reset time.Duration) redlimit.Result {
	return redlimit.Result{Allowed: true, Remaining: rem, ResetAfter: reset}
}

func deny(rem int64, retry, reset time.Duration) redlimit.Result {
	return redlimit.Result{Remaining: rem, RetryAfter: retry, ResetAfter: reset}
}

// TestDebitLargest: the largest debit (MaxCost), twice and three times, on
// each algorithm at the largest Count and Period: counted up to the bound
// and no further, with exact answers, and drained on time.
func TestDebitLargest(t *testing.T) {
	W := int64(redlimit.MaxPeriod / us)
	t0 := redlimittest.T0.UnixMicro()
	end := (t0/W + 1) * W // the end of T0's window
	const M = redlimit.MaxCost
	t.Run("fixed_window", func(t *testing.T) {
		l := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).FixedWindow()
		left := time.Duration(end-t0) * us
		runDebitSteps(t, []debitStep{
			{0, "debit", l, M, ok(0, left)},
			{0, "debit", l, M, deny(0, left, left)},
			{0, "debit", l, M, deny(0, left, left)},
			{left, "allow", l, M, ok(0, redlimit.MaxPeriod)},
		})
	})
	t.Run("sliding_window", func(t *testing.T) {
		l := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod)
		left := time.Duration(end-t0) * us
		// In the next window the previous one's 2*MaxCost (the bound: the
		// third debit counted nothing) weighs MaxCount - 1 when
		// floor((MaxCount-1)*W / (2*MaxCount)) of it remains.
		q := new(big.Int).Mul(big.NewInt(M-1), big.NewInt(W))
		q.Div(q, big.NewInt(2*M))
		runDebitSteps(t, []debitStep{
			{0, "debit", l, M, ok(0, left+redlimit.MaxPeriod)},
			{0, "debit", l, M, deny(0, left+redlimit.MaxPeriod, left+redlimit.MaxPeriod)},
			{0, "debit", l, M, deny(0, left+redlimit.MaxPeriod, left+redlimit.MaxPeriod)},
			{left, "peek", l, 1, deny(0, time.Duration(W-q.Int64())*us, redlimit.MaxPeriod)},
		})
	})
	t.Run("sliding_log", func(t *testing.T) {
		l := redlimit.Per(redlimit.MaxLogCount, redlimit.MaxPeriod).SlidingLog()
		s := runDebitSteps(t, []debitStep{
			{0, "debit", l, M, deny(0, redlimit.Never, redlimit.MaxPeriod)},
			// Counts MaxLogCount: MaxCost + Count in all.
			{us, "debit", l, M, deny(0, redlimit.Never, redlimit.MaxPeriod)},
			{us, "peek", l, 1, deny(0, redlimit.MaxPeriod, redlimit.MaxPeriod)},
			{us, "debit", l, M, deny(0, redlimit.Never, redlimit.MaxPeriod)},
			// The MaxCost at T0 has expired; the MaxLogCount at 1 µs deny
			// for one more µs.
			{redlimit.MaxPeriod, "peek", l, 1, deny(0, us, us)},
			{redlimit.MaxPeriod + us, "allow", l, redlimit.MaxLogCount, ok(0, redlimit.MaxPeriod)},
		})
		if n, _ := s.LogEntries("k", l); n > 2 {
			t.Errorf("the log holds %d entries, want at most 2", n)
		}
	})
	t.Run("token_bucket", func(t *testing.T) {
		l := redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount)
		ei := l.EmissionInterval()
		tau := time.Duration(M*ei) * us
		limit := tau + redlimit.MaxPeriod // the most the arrival time may be ahead of now
		runDebitSteps(t, []debitStep{
			{0, "debit", l, M, ok(0, tau)},
			{0, "debit", l, M, deny(0, limit, limit)},
			{0, "debit", l, 1, deny(0, redlimit.MaxPeriod+time.Duration(ei)*us, limit)},
			// The clock goes back: the arrival time stays where it was.
			{-time.Second, "debit", l, M, deny(0, limit+time.Second, limit+time.Second)},
			{limit - tau, "peek", l, 1, deny(0, time.Duration(ei)*us, tau)},
		})
	})
}

// TestDebitClockBackUnderDebt: a clock that goes back under debt counts the
// debit as the clock-back rules count any request: in the key's latest
// window, at the log's newest instant, and never moving a bucket's arrival
// time back.
func TestDebitClockBackUnderDebt(t *testing.T) {
	fixed := redlimit.PerSecond(3).FixedWindow()
	log := redlimit.PerSecond(3).SlidingLog()
	bucket := redlimit.PerSecond(10).TokenBucket(3)
	t.Run("fixed_window", func(t *testing.T) {
		runDebitSteps(t, []debitStep{
			{1500 * time.Millisecond, "debit", fixed, 5, deny(0, redlimit.Never, 500*time.Millisecond)},
			{900 * time.Millisecond, "debit", fixed, 1, deny(0, 1100*time.Millisecond, 1100*time.Millisecond)},
			{1999 * time.Millisecond, "peek", fixed, 1, deny(0, time.Millisecond, time.Millisecond)},
			{2000 * time.Millisecond, "allow", fixed, 3, ok(0, time.Second)},
		})
	})
	t.Run("sliding_log", func(t *testing.T) {
		runDebitSteps(t, []debitStep{
			{time.Second, "debit", log, 5, deny(0, redlimit.Never, time.Second)},
			// Stamped at 1 s, the log's newest instant.
			{500 * time.Millisecond, "debit", log, 1, deny(0, 1500*time.Millisecond, 1500*time.Millisecond)},
			{1999 * time.Millisecond, "peek", log, 1, deny(0, time.Millisecond, time.Millisecond)},
			{2000 * time.Millisecond, "allow", log, 3, ok(0, time.Second)},
		})
	})
	t.Run("token_bucket", func(t *testing.T) {
		runDebitSteps(t, []debitStep{
			{time.Second, "debit", bucket, 10, deny(0, redlimit.Never, time.Second)},
			// 0.5 s earlier the arrival time is 1.5 s ahead.
			{500 * time.Millisecond, "debit", bucket, 1, deny(0, 1400*time.Millisecond, 1600*time.Millisecond)},
			{1800 * time.Millisecond, "peek", bucket, 1, deny(0, 100*time.Millisecond, 300*time.Millisecond)},
			{1900 * time.Millisecond, "allow", bucket, 1, ok(0, 300*time.Millisecond)},
		})
	})
}

// TestDebitLimitChangedUnderDebt: a count (or burst) changed while a key is
// in debt judges the debt by the new limit, and bounds further debits by it.
func TestDebitLimitChangedUnderDebt(t *testing.T) {
	t.Run("sliding_log", func(t *testing.T) {
		l3 := redlimit.PerSecond(3).SlidingLog()
		l10 := redlimit.PerSecond(10).SlidingLog()
		runDebitSteps(t, []debitStep{
			{0, "debit", l3, 2, ok(1, time.Second)},
			{100 * time.Millisecond, "debit", l3, 2, deny(0, time.Second, time.Second)},
			// The units at 0 are merged into those at 100 ms: the 4 units
			// after them are more than the count.
			{200 * time.Millisecond, "debit", l3, 2, deny(0, time.Second, time.Second)},
			// 6 units: under 10 a second, 4 remain; the oldest expire when
			// the merged entry does.
			{200 * time.Millisecond, "peek", l10, 4, ok(0, time.Second)},
			{200 * time.Millisecond, "allow", l10, 5, deny(4, 900*time.Millisecond, time.Second)},
			{1000 * time.Millisecond, "allow", l10, 5, deny(4, 100*time.Millisecond, 200*time.Millisecond)},
			{1100 * time.Millisecond, "allow", l10, 8, ok(0, time.Second)},
		})
	})
	t.Run("token_bucket", func(t *testing.T) {
		b3 := redlimit.PerSecond(10).TokenBucket(3)
		b10 := redlimit.PerSecond(10).TokenBucket(10)
		runDebitSteps(t, []debitStep{
			{0, "debit", b3, 8, deny(0, redlimit.Never, 800*time.Millisecond)},
			// Under a burst of 10 the 0.8 s of arrival time leave 2.
			{0, "allow", b10, 2, ok(0, time.Second)},
			{0, "debit", b3, 1, deny(0, 900*time.Millisecond, 1100*time.Millisecond)},
		})
	})
}

// TestDebitLogFloodBounded: 100,000 debits of cost 1 at distinct
// microseconds on one sliding log of 10 an hour: the log holds at most
// 2*Count + 3 entries, its buffer and the store's bytes stay bounded (and
// counted right), and no debit is refused by a store with room for little
// more than that.
func TestDebitLogFloodBounded(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	const count = 10
	l := redlimit.PerHour(count).SlidingLog()
	// Room for the key, a state and a buffer of 32 entries, and little more.
	s, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0), memory.WithMaxBytes(180+1+130+16*32+100))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	most := 0
	for i := range 100_000 {
		clock.Set(redlimittest.T0.Add(time.Duration(i) * us))
		r, err := redlimit.Debit(ctx, s, "k", l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < count; r.Allowed != want || (!want && r.RetryAfter != time.Hour-(count-1)*us) {
			t.Fatalf("debit %d: %+v", i, r)
		}
		n, _ := s.LogEntries("k", l)
		most = max(most, n)
		if n > 2*count+3 {
			t.Fatalf("debit %d: the log holds %d entries, more than 2*Count+3", i, n)
		}
	}
	st := s.Stats()
	_, bytes, _, _, _ := s.Audit()
	if st.Refused != 0 || st.Bytes != bytes {
		t.Errorf("stats %+v, audited bytes %d", st, bytes)
	}
	_, capacity := s.LogEntries("k", l)
	t.Logf("most entries %d, buffer %d, %d bytes", most, capacity, st.Bytes)
}
