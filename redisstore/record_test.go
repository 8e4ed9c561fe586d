package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// bucketValue returns the value of the token bucket key of id under p,
// split in its fields: the TAT alone, or the TAT and the refund record
// (given, last, epoch) that Admit gives a bucket.
func bucketValue(t *testing.T, d deployment, p, id string) []int64 {
	t.Helper()
	key := keyOf(t, d, p, "{"+id+"}:tb:")
	var v []int64
	for _, f := range strings.Fields(d.do(t, key, "GET", key)) {
		v = append(v, atoi(t, f))
	}
	if len(v) != 1 && len(v) != 4 {
		t.Fatalf("%s holds %v: want a TAT, or a TAT and a record of three", key, v)
	}
	return v
}

// TestTokenBucketRecordOnlyFromAdmit: AllowN and AllowAll (one hash tag or
// several, with debits, batched or not) leave a token bucket's key as
// older versions wrote it, the TAT alone; Admit gives it a refund record,
// which the other calls keep, moving its last; a debit that reaches the
// debt bound starts a new epoch, after which an earlier grant's refund
// gives nothing back.
func TestTokenBucketRecordOnlyFromAdmit(t *testing.T) {
	ctx := context.Background()
	lim := redlimit.PerSecond(100).TokenBucket(100) // a token every 10 ms
	fixed := redlimit.PerSecond(100).FixedWindow()
	for _, d := range deployments {
		for _, batching := range []bool{true, false} {
			name := d.name + "/batching"
			if !batching {
				name = d.name + "/alone"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := prefix(t)
				clock := redlimittest.NewClock(today)
				s := d.store(t, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(time.Hour), redisstore.WithPrefix(p), redisstore.WithBatching(batching))
				if r, err := s.AllowN(ctx, "a", lim, 3); err != nil || !r.Allowed {
					t.Fatalf("AllowN: %+v, %v", r, err)
				}
				if dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: "a", Limit: lim, Cost: 2}, {Key: "a", Limit: fixed, Cost: 1}}); err != nil || !dec.Allowed {
					t.Fatalf("AllowAll: %+v, %v", dec, err)
				}
				if _, err := redlimit.Debit(ctx, s, "a", lim, 5); err != nil {
					t.Fatal(err)
				}
				// Two hash tags (two groups on Cluster); c denies, so b's
				// group is refunded there.
				if r, err := s.AllowN(ctx, "c", lim, 100); err != nil || !r.Allowed {
					t.Fatalf("AllowN: %+v, %v", r, err)
				}
				if dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: "b", Limit: lim, Cost: 4}, {Key: "c", Limit: lim, Cost: 1}}); err != nil || dec.Allowed {
					t.Fatalf("AllowAll of b and c: %+v, %v; want a denial", dec, err)
				}
				if dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: "b", Limit: lim, Cost: 4}, {Key: "a", Limit: lim, Cost: 1}}); err != nil || !dec.Allowed {
					t.Fatalf("AllowAll of b and a: %+v, %v", dec, err)
				}
				now := today.UnixMicro()
				for id, tat := range map[string]int64{"a": now + 110_000, "b": now + 40_000, "c": now + 1_000_000} {
					if v := bucketValue(t, d, p, id); len(v) != 1 || v[0] != tat {
						t.Errorf("%s holds %v, want the TAT %d alone", id, v, tat)
					}
				}

				// Admit makes a record: given 0, last and epoch the time.
				g, err := s.Admit(ctx, []redlimit.Request{{Key: "a", Limit: lim, Cost: 10}})
				if err != nil || !g.Allowed {
					t.Fatalf("Admit: %+v, %v", g, err)
				}
				if v, want := bucketValue(t, d, p, "a"), []int64{now + 210_000, 0, now, now}; !slices.Equal(v, want) {
					t.Errorf("after Admit, a holds %v, want %v", v, want)
				}
				// AllowN keeps it and moves last; Refund gives back exactly
				// what nothing but admissions far behind the TAT passed.
				clock.Advance(time.Millisecond)
				if r, err := s.AllowN(ctx, "a", lim, 1); err != nil || !r.Allowed {
					t.Fatalf("AllowN: %+v, %v", r, err)
				}
				if v, want := bucketValue(t, d, p, "a"), []int64{now + 220_000, 0, now + 1000, now}; !slices.Equal(v, want) {
					t.Errorf("after AllowN, a holds %v, want %v", v, want)
				}
				if err := s.Refund(ctx, g, []int64{4}); err != nil {
					t.Fatal(err)
				}
				if v, want := bucketValue(t, d, p, "a"), []int64{now + 180_000, 40_000, now + 1000, now}; !slices.Equal(v, want) {
					t.Errorf("after Refund, a holds %v, want %v", v, want)
				}
				// A debit to the debt bound: a new epoch, and the grant
				// made before gives nothing back.
				g, err = s.Admit(ctx, []redlimit.Request{{Key: "a", Limit: lim, Cost: 1}})
				if err != nil || !g.Allowed {
					t.Fatalf("Admit: %+v, %v", g, err)
				}
				clock.Advance(time.Millisecond)
				if _, err := redlimit.Debit(ctx, s, "a", lim, redlimit.MaxCost); err != nil {
					t.Fatal(err)
				}
				v := bucketValue(t, d, p, "a")
				if len(v) != 4 || v[1] != 0 || v[2] != now+2000 || v[3] != now+2000 {
					t.Fatalf("after a debit to the bound, a holds %v, want given 0, last and epoch %d", v, now+2000)
				}
				if err := s.Refund(ctx, g, []int64{1}); err != nil {
					t.Fatal(err)
				}
				if w := bucketValue(t, d, p, "a"); !slices.Equal(w, v) {
					t.Errorf("a refund from an earlier epoch changed a: %v, was %v", w, v)
				}
			})
		}
	}
}
