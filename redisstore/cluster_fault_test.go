package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// The tests of this file put a resilient.Limiter in front of the store, as
// the service does, and check that a failure on the Cluster path never
// turns a known denial into an admission by a failure policy.

// resilientTimeout is the deadline of the resilient limiters here: longer
// than the default 50 ms, so that a busy machine does not miss it on
// calls that are not faulty, and short enough that a hung call reaches it.
const resilientTimeout = time.Second

var policies = []redlimit.FailurePolicy{redlimit.FailOpen, redlimit.FailLocal}

// quiet is a refund error handler for tests that do not look at reports.
func quiet(context.Context, []redlimit.Request, error) {}

// threeRequests is "a" (used up), "b" and "c" under policy.
func threeRequests(a, b, c string, policy redlimit.FailurePolicy) []redlimit.Request {
	return []redlimit.Request{
		{Key: a, Limit: limA.OnFailure(policy), Cost: 1},
		{Key: b, Limit: limB.OnFailure(policy), Cost: 1},
		{Key: c, Limit: limC.OnFailure(policy), Cost: 1},
	}
}

// checkDenied checks that d is the store's denial by its first limit.
func checkDenied(t *testing.T, what string, d redlimit.Decision, err error) {
	t.Helper()
	if err != nil || d.Allowed {
		t.Errorf("%s: %+v, %v; want a denial", what, d, err)
		return
	}
	if a := d.Results[0]; a.Allowed || a.RetryAfter <= 0 || a.Source != redlimit.FromStore && a.Source != redlimit.FromDenyCache {
		t.Errorf("%s: a's result %+v, want the store's denial", what, a)
	}
}

// TestShardedDenialThroughResilient: behind resilient with the fail_open
// and local policies, a group's failed call or a failed refund does not
// admit a request that a used-up limit denies, the first time (answered by
// the store) or after (answered by the deny cache).
func TestShardedDenialThroughResilient(t *testing.T) {
	faults := []struct {
		name string
		op   string
		id   string
		f    fault
	}{
		{"b refused", "allow", "b", refuse},
		{"b's reply lost", "allow", "b", lose},
		{"b hung", "allow", "b", hang},
		{"c's refund refused", "refund", "c", refuse},
		{"c's refund hung", "refund", "c", hang},
	}
	for _, cl := range clients {
		for _, policy := range policies {
			for _, fc := range faults {
				t.Run(cl.name+"/"+policy.String()+"/"+fc.name, func(t *testing.T) {
					t.Parallel()
					in := newInjector(func(c scriptCall, _ int) fault {
						if onTag(c, fc.op, fc.id) {
							return fc.f
						}
						return pass
					})
					s := faultyStore(t, cl.goRedis, in, redisstore.WithPrefix(prefix(t)), redisstore.WithRefundErrorHandler(quiet))
					exhaust(t, s)
					l, err := resilient.New(s, resilient.Options{Timeout: resilientTimeout})
					if err != nil {
						t.Fatal(err)
					}
					defer l.Close()
					for i := range 3 {
						d, err := l.AllowAll(context.Background(), threeRequests("a", "b", "c", policy))
						checkDenied(t, fmt.Sprint("call ", i), d, err)
						if i == 0 && d.Results[0].Source != redlimit.FromStore {
							t.Errorf("call 0: a's result %+v, want it from the store", d.Results[0])
						}
					}
				})
			}
		}
	}
}

// reports collects what a store's refund error handler is told.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) handle(_ context.Context, _ []redlimit.Request, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *reports) get() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// TestFaultClusterNodeHungOrKilled makes a real master of a cluster of its
// own fail under sharded AllowAll calls made through resilient: paused
// (SIGSTOP) while the groups are decided, paused while a refund is in
// flight, killed (SIGKILL) just before a refund. Every call is the
// store's denial, in time; a refund that could not be made is reported,
// and one that was only late is applied once, not twice.
func TestFaultClusterNodeHungOrKilled(t *testing.T) {
	t.Parallel()
	redistest.Exclusive(t)
	// A node timeout longer than any pause here: no failover until the kill.
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 5 * time.Second})
	ids, masters, err := cluster.DistinctMasters(3)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := ids[0], ids[1], ids[2]
	mb, mc := masters[1], masters[2]
	ctx := context.Background()

	t.Run("b's master paused while deciding", func(t *testing.T) {
		type run struct {
			name string
			s    *redisstore.Store
			l    *resilient.Limiter
			reqs []redlimit.Request
		}
		var runs []*run
		for _, cl := range clients {
			for _, policy := range policies {
				s := faultyStoreOn(t, cluster, cl.goRedis, newInjector(func(scriptCall, int) fault { return pass }),
					redisstore.WithPrefix(prefix(t)), redisstore.WithRefundErrorHandler(quiet))
				if r, err := s.AllowN(ctx, a, limA, 1); err != nil || !r.Allowed {
					t.Fatalf("using up a: %+v, %v", r, err)
				}
				l, err := resilient.New(s, resilient.Options{Timeout: resilientTimeout})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				runs = append(runs, &run{cl.name + "/" + policy.String(), s, l, threeRequests(a, b, c, policy)})
			}
		}
		if err := mb.Pause(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(func() {
				d, err := r.l.AllowAll(ctx, r.reqs)
				checkDenied(t, r.name, d, err)
				if err == nil && d.Results[1].Source != redlimit.Undecided {
					t.Errorf("%s: b's result %+v, want undecided", r.name, d.Results[1])
				}
			})
		}
		wg.Wait()
		if err := mb.Resume(); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			r.s.Close()
			checkLeft(t, r.s, c, limC, 10)
			// b's call, sent to the paused node, may have run when it
			// resumed: consumed, on the strict side, never more.
			if p, err := r.s.Peek(ctx, b, limB, 9); err != nil || !p.Allowed {
				t.Errorf("%s: b has less than 9 left: %+v, %v", r.name, p, err)
			}
		}
	})

	t.Run("c's master paused with a refund in flight", func(t *testing.T) {
		for _, cl := range clients {
			var paused sync.Once
			in := newInjector(func(call scriptCall, _ int) fault {
				if onTag(call, "refund", c) {
					paused.Do(func() {
						if err := mc.Pause(); err != nil {
							t.Error(err)
						}
					})
				}
				return pass
			})
			var rep reports
			s := faultyStoreOn(t, cluster, cl.goRedis, in, redisstore.WithPrefix(prefix(t)), redisstore.WithRefundErrorHandler(rep.handle))
			if r, err := s.AllowN(ctx, a, limA, 1); err != nil || !r.Allowed {
				t.Fatalf("using up a: %+v, %v", r, err)
			}
			// One of c's ten used before: a refund applied twice would
			// leave ten.
			if r, err := s.AllowN(ctx, c, limC, 1); err != nil || !r.Allowed {
				t.Fatalf("c: %+v, %v", r, err)
			}
			l, err := resilient.New(s, resilient.Options{Timeout: resilientTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d, err := l.AllowAll(ctx, threeRequests(a, b, c, redlimit.FailOpen))
			checkDenied(t, cl.name, d, err)
			if !waitFor(5*time.Second, func() bool { return len(rep.get()) > 0 }) {
				t.Fatalf("%s: the refund that timed out was not reported", cl.name)
			}
			if errs := rep.get(); len(errs) != 1 || !errors.Is(errs[0], redisstore.ErrRefund) || !strings.Contains(errs[0].Error(), "may still be applied") {
				t.Errorf("%s: reported %v, want one refund that may still be applied", cl.name, errs)
			}
			t.Logf("%s: reported %v", cl.name, rep.get())
			if err := mc.Resume(); err != nil {
				t.Fatal(err)
			}
			// The refund, sent before the pause, runs now: once.
			nine := func() bool {
				p, err := s.Peek(ctx, c, limC, 9)
				return err == nil && p.Allowed && p.Remaining == 0
			}
			if !waitFor(5*time.Second, nine) {
				t.Errorf("%s: c never had 9 left after the node resumed", cl.name)
			}
			time.Sleep(100 * time.Millisecond)
			checkLeft(t, s, c, limC, 9)
		}
	})

	// One kill per client: after the first, the second client's call to
	// the dead node would fail, and there would be nothing to refund. The
	// second kill comes within the node timeout of the first, while the
	// cluster still serves the other slots.
	t.Run("master killed before a refund", func(t *testing.T) {
		for i, cl := range clients {
			id, victim := []string{c, b}[i], []*redistest.Server{mc, mb}[i]
			var killed sync.Once
			in := newInjector(func(call scriptCall, _ int) fault {
				if onTag(call, "refund", id) {
					killed.Do(func() {
						if err := victim.Kill(); err != nil {
							t.Error(err)
						}
					})
				}
				return pass
			})
			rep := &reports{}
			s := faultyStoreOn(t, cluster, cl.goRedis, in, redisstore.WithPrefix(prefix(t)), redisstore.WithRefundErrorHandler(rep.handle))
			if r, err := s.AllowN(ctx, a, limA, 1); err != nil || !r.Allowed {
				t.Fatalf("using up a: %+v, %v", r, err)
			}
			l, err := resilient.New(s, resilient.Options{Timeout: resilientTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d, err := l.AllowAll(ctx, []redlimit.Request{
				{Key: a, Limit: limA.OnFailure(redlimit.FailOpen), Cost: 1},
				{Key: id, Limit: limC.OnFailure(redlimit.FailOpen), Cost: 1},
			})
			checkDenied(t, cl.name, d, err)
			if err == nil && !d.Results[1].Allowed {
				t.Fatalf("%s: %s's result %+v, want it allowed (and refunded)", cl.name, id, d.Results[1])
			}
			// Within the refund's time limit, and the retries'.
			start := time.Now()
			if !waitFor(5*time.Second, func() bool { return len(rep.get()) > 0 }) {
				t.Fatalf("%s: the refund to the killed node was not reported", cl.name)
			}
			if errs := rep.get(); len(errs) != 1 || !errors.Is(errs[0], redisstore.ErrRefund) {
				t.Errorf("%s: reported %v, want one refund failure", cl.name, errs)
			}
			t.Logf("%s: reported %v after %s", cl.name, rep.get(), time.Since(start).Round(time.Millisecond))
		}
	})
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
