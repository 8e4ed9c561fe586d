package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// The tests of this file decide requests on three identifiers, "a", "b"
// and "c", each its own group of a sharded AllowAll (one script call per
// hash tag), on the shared cluster, with faults injected into the calls of
// one group by the client (see faults_test.go).

var (
	limA = redlimit.PerHour(1).FixedWindow()  // used up before the call: "a" denies
	limB = redlimit.PerHour(10).SlidingLog()  // the group that fails, in some tests
	limC = redlimit.PerHour(10).FixedWindow() // allows, and must be refunded
)

// onTag reports whether c is a call of op on identifier id.
func onTag(c scriptCall, op, id string) bool {
	return c.op == op && strings.Contains(c.keys[0], "{"+id+"}")
}

var clients = []struct {
	name    string
	goRedis bool
}{{"rueidis", false}, {"goredis", true}}

// exhaust uses up "a".
func exhaust(t *testing.T, s *redisstore.Store) {
	t.Helper()
	if r, err := s.AllowN(context.Background(), "a", limA, 1); err != nil || !r.Allowed {
		t.Fatalf("using up a: %+v, %v", r, err)
	}
}

// checkLeft checks that key has exactly left of lim's allowance.
func checkLeft(t *testing.T, s *redisstore.Store, key string, lim redlimit.Limit, left int64) {
	t.Helper()
	r, err := s.Peek(context.Background(), key, lim, left)
	if err != nil || !r.Allowed || r.Remaining != 0 {
		t.Errorf("%s: Peek of %d: %+v, %v; want %d left exactly", key, left, r, err, left)
	}
}

// TestShardedDenialSurvivesAFailedGroup: a group whose call fails (Redis
// refuses it, its reply is lost, or its node hangs) does not turn another
// group's denial into an error, and what the allowed group consumed is
// given back.
func TestShardedDenialSurvivesAFailedGroup(t *testing.T) {
	for _, cl := range clients {
		for _, f := range []fault{refuse, lose, hang} {
			t.Run(cl.name+"/"+faultNames[f], func(t *testing.T) {
				t.Parallel()
				in := newInjector(func(c scriptCall, _ int) fault {
					if onTag(c, "allow", "b") {
						return f
					}
					return pass
				})
				s := faultyStore(t, cl.goRedis, in, redisstore.WithPrefix(prefix(t)))
				exhaust(t, s)
				// The hung group holds the call until the deadline: the
				// denial must come back before it.
				const deadline = 2 * time.Second
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				start := time.Now()
				d, err := s.AllowAll(ctx, []redlimit.Request{
					{Key: "b", Limit: limB, Cost: 1},
					{Key: "a", Limit: limA, Cost: 1},
					{Key: "c", Limit: limC, Cost: 1},
				})
				took := time.Since(start)
				if err != nil || d.Allowed {
					t.Fatalf("AllowAll: %+v, %v after %s; want a denial", d, err, took)
				}
				if ctx.Err() != nil {
					t.Errorf("the denial came back after the caller's deadline (%s)", took)
				}
				if a := d.Results[1]; a.Allowed || a.RetryAfter <= 0 || a.Source != redlimit.FromStore {
					t.Errorf("a's result %+v, want the store's denial", a)
				}
				// b's result claims neither an allowance nor a denial.
				if b := d.Results[0]; b != (redlimit.Result{Max: limB.Max(), Source: redlimit.Undecided}) {
					t.Errorf("b's result %+v, want undecided", b)
				}
				if c := d.Results[2]; !c.Allowed || c.Remaining != 9 {
					t.Errorf("c's result %+v, want allowed with 9 left", c)
				}
				if i, ra := d.Tightest(), d.RetryAfter(); i != 1 || ra != d.Results[1].RetryAfter {
					t.Errorf("Tightest %d, RetryAfter %s; want a's: 1, %s", i, ra, d.Results[1].RetryAfter)
				}
				s.Close() // waits for the hung call
				checkLeft(t, s, "c", limC, 10)
				if n := in.calls("allow", f); n != 1 {
					t.Errorf("%d calls of b got the fault, want 1", n)
				}
				if f != lose {
					checkLeft(t, s, "b", limB, 10)
				}
			})
		}
	}
}

// TestShardedRefundFailures: the refund of an allowed group after a denial
// fails. The denial stays a denial; a refund Redis refused is retried; one
// that ran but whose reply was lost is not (it would give back twice).
func TestShardedRefundFailures(t *testing.T) {
	cases := []struct {
		name string
		rule func(nth int) fault
		// left is what "c" has left after the call: 9 when its cost was
		// given back once, 8 when the refund never ran.
		left int64
		// attempts is how many refunds were sent; reported, the error the
		// handler got, or "".
		attempts int
		reported string
	}{
		{"refused twice", func(nth int) fault { return map[bool]fault{true: refuse, false: pass}[nth <= 2] }, 9, 3, ""},
		{"refused always", func(int) fault { return refuse }, 8, 4, "not applied after 4 attempts"},
		{"reply lost", func(nth int) fault { return map[bool]fault{true: lose, false: pass}[nth == 1] }, 9, 1, "it may still be applied; not retried"},
		{"hung", func(int) fault { return hang }, 8, 1, "it may still be applied; not retried"},
	}
	for _, cl := range clients {
		for _, tc := range cases {
			t.Run(cl.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				in := newInjector(func(c scriptCall, nth int) fault {
					if onTag(c, "refund", "c") {
						return tc.rule(nth)
					}
					return pass
				})
				var mu sync.Mutex
				var reports []string
				s := faultyStore(t, cl.goRedis, in, redisstore.WithPrefix(prefix(t)), redisstore.WithRefundErrorHandler(
					func(_ context.Context, reqs []redlimit.Request, err error) {
						mu.Lock()
						defer mu.Unlock()
						if !errors.Is(err, redisstore.ErrRefund) || len(reqs) != 1 || reqs[0].Key != "c" {
							t.Errorf("reported %v for %+v; want ErrRefund for c", err, reqs)
						}
						reports = append(reports, err.Error())
					}))
				exhaust(t, s)
				ctx := context.Background()
				if r, err := s.AllowN(ctx, "c", limC, 1); err != nil || !r.Allowed {
					t.Fatalf("c: %+v, %v", r, err)
				}
				// The hung refund runs to its own time limit (1 s); the
				// caller, with a deadline as long, gets its denial first.
				const deadline = time.Second
				cctx, cancel := context.WithTimeout(ctx, deadline)
				defer cancel()
				start := time.Now()
				d, err := s.AllowAll(cctx, []redlimit.Request{
					{Key: "a", Limit: limA, Cost: 1},
					{Key: "c", Limit: limC, Cost: 1},
				})
				took := time.Since(start)
				if err != nil || d.Allowed {
					t.Fatalf("AllowAll: %+v, %v after %s; want a denial", d, err, took)
				}
				if cctx.Err() != nil {
					t.Errorf("the denial came back after the caller's deadline (%s)", took)
				}
				s.Close() // waits for the refund still running
				checkLeft(t, s, "c", limC, tc.left)
				sent := 0
				for _, f := range []fault{pass, refuse, lose, hang} {
					sent += in.calls("refund", f)
				}
				if sent != tc.attempts {
					t.Errorf("%d refunds sent, want %d", sent, tc.attempts)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case tc.reported == "" && len(reports) > 0:
					t.Errorf("reported %q, want nothing", reports)
				case tc.reported != "" && (len(reports) != 1 || !strings.Contains(reports[0], tc.reported)):
					t.Errorf("reported %q, want once %q", reports, tc.reported)
				}
			})
		}
	}
}

// TestShardedErrorRefundsTheAllowed: when no group denied and one failed,
// AllowAll returns the error, and the groups that allowed are refunded.
func TestShardedErrorRefundsTheAllowed(t *testing.T) {
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			t.Parallel()
			in := newInjector(func(c scriptCall, _ int) fault {
				if onTag(c, "allow", "b") {
					return refuse
				}
				return pass
			})
			s := faultyStore(t, cl.goRedis, in, redisstore.WithPrefix(prefix(t)))
			d, err := s.AllowAll(context.Background(), []redlimit.Request{
				{Key: "a", Limit: limC, Cost: 1},
				{Key: "b", Limit: limB, Cost: 1},
				{Key: "c", Limit: limC, Cost: 1},
			})
			if err == nil || !strings.Contains(err.Error(), "call refused") || d.Allowed {
				t.Fatalf("AllowAll: %+v, %v; want the refusal", d, err)
			}
			s.Close()
			checkLeft(t, s, "a", limC, 10)
			checkLeft(t, s, "c", limC, 10)
		})
	}
}
