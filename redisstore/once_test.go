package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// used returns how many units of lim's count key has used on s (a peek).
func used(t *testing.T, s *redisstore.Store, key string, lim redlimit.Limit) int64 {
	t.Helper()
	r, err := s.Peek(context.Background(), key, lim, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Peek's Remaining is what would be left after one more.
	return lim.Max() - 1 - r.Remaining
}

// TestDebitOnceCountsEachIDOnce: on every deployment and algorithm, a
// debit sent twice with one id is counted once, a debit with another id
// is counted, and the marker lives beside the limit's key (on Cluster the
// script would fail with CROSSSLOT otherwise) for twice the period.
func TestDebitOnceCountsEachIDOnce(t *testing.T) {
	t.Parallel()
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			s := d.store(t, redisstore.WithPrefix(p))
			ctx := context.Background()
			for _, lim := range []redlimit.Limit{
				redlimit.PerHour(100).FixedWindow(), redlimit.PerHour(100).SlidingLog(),
				redlimit.PerHour(100).SlidingWindow(), redlimit.PerHour(100).TokenBucket(100),
			} {
				key := "k-" + lim.Algorithm.String()
				req := redlimit.Request{Key: key, Limit: lim, Cost: 30}
				// The first call's result is the debit's; the others' a
				// peek's, which says what one more of 30 would leave.
				for i, want := range []bool{true, false, false} {
					r, counted, err := s.DebitOnce(ctx, req, "0123456789abcdef0123456789abcdef")
					if err != nil || counted != want {
						t.Fatalf("%s: call %d: %+v, counted %v, %v; want counted %v", lim, i, r, counted, err, want)
					}
					if rem := map[bool]int64{true: 70, false: 40}[want]; !r.Allowed || r.Remaining != rem {
						t.Errorf("%s: call %d: %+v, want allowed with %d remaining", lim, i, r, rem)
					}
				}
				if _, counted, err := s.DebitOnce(ctx, req, "another"); err != nil || !counted {
					t.Fatalf("%s: another id: counted %v, %v", lim, counted, err)
				}
				if n := used(t, s, key, lim); n != 60 {
					t.Errorf("%s: %d units used, want 60: two ids of 30", lim, n)
				}
				var marker string
				for _, k := range d.keysWithPrefix(t, p+"{"+key+"}") {
					if strings.HasSuffix(k, ":once:another") {
						marker = k
					}
				}
				if marker == "" {
					t.Fatalf("%s: no marker among %v", lim, d.keysWithPrefix(t, p+"{"+key+"}"))
				}
				if ttl := atoi(t, d.do(t, marker, "PTTL", marker)); ttl < int64(time.Hour/time.Millisecond) || ttl > int64(2*time.Hour/time.Millisecond) {
					t.Errorf("%s: marker %s lives %d ms, want about two hours", lim, marker, ttl)
				}
				if d.cluster {
					base := strings.TrimSuffix(marker, ":once:another")
					if a, b := d.do(t, marker, "CLUSTER", "KEYSLOT", marker), d.do(t, base, "CLUSTER", "KEYSLOT", base); a != b {
						t.Errorf("%s: marker in slot %s, key in %s", lim, a, b)
					}
				}
			}
		})
	}
}

// TestDebitOnceRejectsBadInput: a bad id or request is an error wrapping
// the sentinel, before anything is sent.
func TestDebitOnceRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := deployments[0].store(t, redisstore.WithPrefix(prefix(t)))
	ctx := context.Background()
	ok := redlimit.Request{Key: "k", Limit: redlimit.PerHour(10).FixedWindow(), Cost: 1}
	for _, id := range []string{"", "a{b}", "a:b", "a b", strings.Repeat("a", redisstore.MaxIDLen+1)} {
		if _, _, err := s.DebitOnce(ctx, ok, id); !errors.Is(err, redisstore.ErrInvalidID) {
			t.Errorf("id %q: %v, want ErrInvalidID", id, err)
		}
	}
	bad := ok
	bad.Cost = 0
	if _, _, err := s.DebitOnce(ctx, bad, "x"); !errors.Is(err, redlimit.ErrInvalidCost) {
		t.Errorf("cost 0: %v, want ErrInvalidCost", err)
	}
	bad = ok
	bad.Key = ""
	if _, _, err := s.DebitOnce(ctx, bad, "x"); !errors.Is(err, redlimit.ErrInvalidKey) {
		t.Errorf("empty key: %v, want ErrInvalidKey", err)
	}
}

// TestDebitOnceAfterALostReply: a debit sent to a frozen Redis times out,
// and Redis counts it when it resumes; sent again with its id it is not
// counted again. A debit that never reached Redis (the caller gave up
// first) is counted when sent again with its id.
func TestDebitOnceAfterALostReply(t *testing.T) {
	t.Parallel()
	srv, s := ownServerStore(t)
	lim := redlimit.PerHour(100).SlidingWindow()
	bg := context.Background()
	if _, _, err := s.DebitOnce(bg, redlimit.Request{Key: "warm", Limit: lim, Cost: 1}, "w"); err != nil { // loads the script
		t.Fatal(err)
	}
	req := redlimit.Request{Key: "k", Limit: lim, Cost: 30}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, time.Second)
	_, _, err := s.DebitOnce(ctx, req, "lost")
	cancel()
	if err == nil || s.NotApplied(err) {
		t.Fatalf("a debit to a frozen Redis: %v, want an error, not known to have run", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// The command normally reached the frozen server's socket, which runs
	// it on SIGCONT; on a loaded machine the client may not have written
	// it before the deadline (one run at load average 15), so whether it
	// ran is unknown either way, and sent again it must count exactly once.
	delivered := false
	for deadline := time.Now().Add(3 * time.Second); !delivered && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		delivered = used(t, s, "k", lim) == 30
	}
	if !delivered {
		t.Log("the debit sent while Redis was frozen never reached it: checking the other case")
	}
	if _, counted, err := s.DebitOnce(bg, req, "lost"); err != nil || counted == delivered {
		t.Errorf("sent again after the first was applied=%v: counted %v, %v", delivered, counted, err)
	}
	if n := used(t, s, "k", lim); n != 30 {
		t.Errorf("%d units used, want 30: counted once", n)
	}

	gone, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := s.DebitOnce(gone, redlimit.Request{Key: "k2", Limit: lim, Cost: 30}, "never"); err == nil {
		t.Fatal("a debit with a cancelled context succeeded")
	}
	if _, counted, err := s.DebitOnce(bg, redlimit.Request{Key: "k2", Limit: lim, Cost: 30}, "never"); err != nil || !counted {
		t.Errorf("sent again: counted %v, %v; want counted", counted, err)
	}
	if n := used(t, s, "k2", lim); n != 30 {
		t.Errorf("%d units used, want 30: counted once", n)
	}
}
