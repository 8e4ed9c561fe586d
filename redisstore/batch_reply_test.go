package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestBatchReplyRefusesMalformed feeds batchReply the replies of a batch
// of one decision, a run of three identical ones and a decision of two
// limits: the well-formed ones give each decision its values, and every
// reply that is short, long or whose segments do not cover the run
// exactly is refused, without a panic. Entries that failed on their key
// (listed at the end) give their decisions ErrKeyState, and a list that
// does not fit the batch is refused.
func TestBatchReplyRefusesMalformed(t *testing.T) {
	l := redlimit.PerMinute(10).FixedWindow()
	one := redlimit.Request{Key: "a", Limit: l, Cost: 2}
	batch := func() []*entry {
		return []*entry{
			{req: one, key: "a"},
			{req: one, key: "b"}, {req: one, key: "b"}, {req: one, key: "b"},
			{reqs: []redlimit.Request{one, one}},
		}
	}
	several := []int64{1, 8, 0, 5, 0, 0, 7, 5}
	cat := func(parts ...[]int64) []int64 {
		var v []int64
		for _, p := range parts {
			v = append(v, p...)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		v    []int64
		ok   bool
		run  [3]redlimit.Result // the run's answers, when ok
	}{
		{"one segment of steps", cat([]int64{8, 40}, []int64{3, 6, 50, -2, 0}, several), true, [3]redlimit.Result{
			{Allowed: true, Remaining: 6, ResetAfter: 50 * time.Microsecond},
			{Allowed: true, Remaining: 4, ResetAfter: 50 * time.Microsecond},
			{Allowed: true, Remaining: 2, ResetAfter: 50 * time.Microsecond},
		}},
		{"admitted one by one, then denied", cat([]int64{-1, 3, 40}, []int64{1, 2, 50, 0, 0}, []int64{-2, 0, 7, 50}, several), true, [3]redlimit.Result{
			{Allowed: true, Remaining: 2, ResetAfter: 50 * time.Microsecond},
			{Remaining: 0, RetryAfter: 7 * time.Microsecond, ResetAfter: 50 * time.Microsecond},
			{Remaining: 0, RetryAfter: 7 * time.Microsecond, ResetAfter: 50 * time.Microsecond},
		}},
		{"all denied, never", cat([]int64{8, 40}, []int64{-3, 1, -1, 50}, several), true, [3]redlimit.Result{
			{Remaining: 1, RetryAfter: redlimit.Never, ResetAfter: 50 * time.Microsecond},
			{Remaining: 1, RetryAfter: redlimit.Never, ResetAfter: 50 * time.Microsecond},
			{Remaining: 1, RetryAfter: redlimit.Never, ResetAfter: 50 * time.Microsecond},
		}},
		{"empty", nil, false, [3]redlimit.Result{}},
		{"a segment past the run", cat([]int64{8, 40}, []int64{4, 6, 50, -2, 0}, several), false, [3]redlimit.Result{}},
		{"a segment of none", cat([]int64{8, 40}, []int64{0, 6, 50, -2, 0}, several), false, [3]redlimit.Result{}},
		{"denials short of the run", cat([]int64{8, 40}, []int64{-2, 0, 7, 50}, several), false, [3]redlimit.Result{}},
		{"denials past the run", cat([]int64{8, 40}, []int64{1, 2, 50, 0, 0}, []int64{-3, 0, 7, 50}, several), false, [3]redlimit.Result{}},
		{"the run cut short", cat([]int64{8, 40}, []int64{3, 6, 50}), false, [3]redlimit.Result{}},
		{"several cut short", cat([]int64{8, 40}, []int64{3, 6, 50, -2, 0}, several[:7]), false, [3]redlimit.Result{}},
		{"a value too many", cat([]int64{8, 40}, []int64{3, 6, 50, -2, 0}, several, []int64{1}), false, [3]redlimit.Result{}},
		{"a denial cut short", []int64{-1, 3}, false, [3]redlimit.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := batch()
			// Entries: a decision, a run of 3, several. No entry failed:
			// the reply ends with 0.
			var w wire
			w.addEntries(b)
			if got := batchReply(b, &w, append(append([]int64{99}, tc.v...), 0)); got != tc.ok {
				t.Fatalf("batchReply = %v, want %v", got, tc.ok)
			}
			if !tc.ok {
				return
			}
			for i, want := range tc.run {
				want.Max = 10
				if got := b[1+i].out.res; got != want || b[1+i].out.at != 99 {
					t.Errorf("decision %d of the run: %+v at %d, want %+v", i, got, b[1+i].out.at, want)
				}
			}
			if got := b[4].out.results; len(got) != 2 || !got[0].Allowed || got[1].Allowed || got[1].RetryAfter != 7*time.Microsecond {
				t.Errorf("several: %+v", got)
			}
		})
	}
}

// TestBatchReplyKeyFailures feeds batchReply replies whose entries failed
// on their keys: each decision of a failed entry gets ErrKeyState, the
// others their values; a failure list that does not fit is refused.
func TestBatchReplyKeyFailures(t *testing.T) {
	l := redlimit.PerMinute(10).FixedWindow()
	one := redlimit.Request{Key: "a", Limit: l, Cost: 2}
	batch := func() []*entry {
		return []*entry{
			{req: one, key: "a", op: opAllow},
			{req: one, key: "b", op: opAllow}, {req: one, key: "b", op: opAllow},
			{reqs: []redlimit.Request{one, one}, op: opAllow},
		}
	}
	several := []int64{1, 8, 0, 5, 0, 0, 7, 5}
	for _, tc := range []struct {
		name   string
		v      []int64
		ok     bool
		failed []bool // by decision, when ok
	}{
		{"the run failed", append([]int64{8, 40}, append(several, 2, 1, 1)...), true, []bool{false, true, true, false}},
		{"the first and last failed", []int64{2, 6, 50, 0, 0, 1, 2, 3, 1, 2}, true, []bool{true, false, false, true}},
		{"all failed", []int64{1, 1, 2, 1, 3, 2, 3}, true, []bool{true, true, true, true}},
		{"a failure of no entry", []int64{8, 40, 2, 6, 50, 0, 0, 4, 1, 1}, false, nil},
		{"failures out of order", []int64{2, 6, 50, 0, 0, 3, 1, 1, 2, 2}, false, nil},
		{"a failed entry that answers", append([]int64{8, 40, 2, 6, 50, 0, 0}, append(several, 1, 1, 1)...), false, nil},
		{"more failures than values", []int64{5}, false, nil},
		{"a negative count", append([]int64{8, 40, 2, 6, 50, 0, 0}, append(several, -1)...), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := batch()
			var w wire
			w.addEntries(b)
			if got := batchReply(b, &w, append([]int64{99}, tc.v...)); got != tc.ok {
				t.Fatalf("batchReply = %v, want %v", got, tc.ok)
			}
			for i, f := range tc.failed {
				if got := errors.Is(b[i].out.err, redlimit.ErrKeyState); got != f {
					t.Errorf("decision %d: %+v; want failed %v", i, b[i].out, f)
				}
			}
		})
	}
}
