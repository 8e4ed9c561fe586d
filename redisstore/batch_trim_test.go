package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestBatchRunTrimThenGivebackClockBack: a batch run's admissions on a
// sliding log are written as one append (run_log in lua/batch.lua), which
// must trim expired entries as the admissions' appends one by one would:
// each that takes the cum past a multiple of min(8, count) trims up to
// LOG_TRIM_MOST - 1 entries, the first relative to the log's newest entry
// before the run, the others relative to the run's instant t. A decision
// never sees expired entries, but a giveback (Store.Refund) that takes out
// the newest entry leaves expired what had expired at that entry's time
// only when at most LOG_TRIM_MOST entries had (expire_before in
// lua/refund.lua); with more, they stay, and a clock that steps back
// counts them again. A run that trimmed once (as it did, until this test)
// left more expired entries, crossed that bound where the calls one by
// one did not, and answered one unit more counted (34 remaining for 35).
//
// The log (count 100 per 10 ms): 40 entries at 3..4 ms and one at 12 ms;
// a run of 64 identical admissions at 20 ms, where the 40 have expired
// (one by one, eight trims of up to 15 leave one of them); an admission
// at 25 ms, given back whole; then the clock back to 21 ms, where the
// entry at 12 ms is inside the period again. One by one and the memory
// store have it expired (35 remaining), and so must the batch.
//
// The bound itself is the store's, not the batch's: the same history with
// the run replaced by one AllowN of cost 64 (one append, one trim)
// answers 34 one by one too, the strict side.
func TestBatchRunTrimThenGivebackClockBack(t *testing.T) {
	d := deployments[0]
	base := time.UnixMicro(1_700_000_000_000_000)
	clock := newPacedClock(base)
	batched, alone := batchedAndAlone(t, d, clock)
	mem := memoryOn(t, clock.Now)
	ctx := context.Background()
	l := redlimit.Per(100, 10*time.Millisecond).SlidingLog()
	at := func(us int64) { clock.Set(base.Add(time.Duration(us) * time.Microsecond)) }
	all := []redlimit.Limiter{batched, alone, mem}
	for i := range 40 {
		at(3000 + 25*int64(i))
		for _, s := range all {
			if r, err := s.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed {
				t.Fatalf("fill %d: %+v, %v", i, r, err)
			}
		}
	}
	at(12_000)
	for _, s := range all {
		if r, err := s.AllowN(ctx, "k", l, 1); err != nil || !r.Allowed {
			t.Fatalf("at 12 ms: %+v, %v", r, err)
		}
	}
	at(20_000)
	reqs := make([]redlimit.Request, 64)
	for i := range reqs {
		reqs[i] = redlimit.Request{Key: "k", Limit: l, Cost: 1}
	}
	got, err := batched.DecideBatch(ctx, reqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		w1, err1 := alone.AllowN(ctx, r.Key, r.Limit, r.Cost)
		w2, err2 := mem.AllowN(ctx, r.Key, r.Limit, r.Cost)
		if err1 != nil || err2 != nil || got[i] != w1 || got[i] != w2 {
			t.Fatalf("run decision %d: batch %+v, one by one %+v (%v), memory %+v (%v)", i, got[i], w1, err1, w2, err2)
		}
	}
	at(25_000)
	req := []redlimit.Request{{Key: "k", Limit: l, Cost: 1}}
	for i, s := range []redlimit.Refunder{batched, alone, mem} {
		g, err := s.Admit(ctx, req)
		if err != nil || !g.Allowed {
			t.Fatalf("store %d: admit: %+v, %v", i, g, err)
		}
		if err := s.Refund(ctx, g, []int64{1}); err != nil {
			t.Fatalf("store %d: refund: %v", i, err)
		}
	}
	at(21_000)
	var res [3]redlimit.Result
	for i, s := range all {
		if res[i], err = s.Peek(ctx, "k", l, 1); err != nil {
			t.Fatal(err)
		}
	}
	if res[0] != res[1] || res[1] != res[2] {
		t.Fatalf("peek at 21 ms after the giveback: batch %+v, one by one %+v, memory %+v", res[0], res[1], res[2])
	}
}
