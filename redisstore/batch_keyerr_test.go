package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// badKeyLimits are the limits of TestBatchBadKeyFailsAlone: long periods,
// so that no window turns and no token refills while it runs, and
// fail_open, so that resilient answers a store failure unlimited.
var badKeyLimits = []redlimit.Limit{
	failOpen(redlimit.Per(20, 1000*24*time.Hour).FixedWindow()),
	failOpen(redlimit.Per(20, 1000*24*time.Hour).SlidingWindow()),
	failOpen(redlimit.Per(20, 1000*24*time.Hour).SlidingLog()),
	failOpen(redlimit.Per(20, 1000*24*time.Hour).TokenBucket(20)),
}

// failOpen returns l with the failure policy fail_open.
func failOpen(l redlimit.Limit) redlimit.Limit {
	l.Failure = redlimit.FailOpen
	return l
}

// TestBatchBadKeyFailsAlone shows that a key whose state the script cannot
// use fails its own decisions only, with batching on, on one server and on
// a Cluster, directly and through resilient with fail_open. Goroutines
// decide on good keys (every algorithm, and decisions of two limits)
// beside a few on keys of another type (WRONGTYPE) and on a token bucket
// holding text it cannot parse. No good-key decision fails or is answered
// by a failure policy; each good key admits exactly its limit, which
// Redis counted (a peek then denies); each bad-key decision fails with
// ErrKeyState; a decision of two limits, one on a bad key, writes nothing.
func TestBatchBadKeyFailsAlone(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{ReplicasPerMaster: -1})
	for _, c := range []struct {
		name      string
		cluster   bool
		resilient bool
	}{{"standalone", false, false}, {"cluster", true, false}, {"standalone/resilient", false, true}, {"cluster/resilient", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			var s *redisstore.Store
			var set func(key string, args ...string)
			if c.cluster {
				s = clusterStore(t, cl, false, redisstore.WithPrefix(prefix(t)))
				set = func(key string, args ...string) {
					m, err := cl.MasterFor(key)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := m.Do(args...); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				var srv *redistest.Server
				srv, s = ownServerStore(t, redisstore.WithPrefix(prefix(t)))
				set = func(_ string, args ...string) {
					if _, err := srv.Do(args...); err != nil {
						t.Fatal(err)
					}
				}
			}
			var lim redlimit.Limiter = s
			if c.resilient {
				r, err := resilient.New(s, resilient.Options{Timeout: 5 * time.Second, Breaker: resilient.BreakerOptions{FailureThreshold: 1}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				lim = r
			}
			fw, tb := badKeyLimits[0], badKeyLimits[3]
			// Bad keys: each algorithm's key holding another type, and a
			// bucket holding text.
			var bad []redlimit.Request
			for i, l := range badKeyLimits {
				id := "wrongtype" + strconv.Itoa(i)
				k := s.KeyOf(id, l)
				if l.Algorithm == redlimit.SlidingLog {
					set(k, "SET", k, "a string")
				} else {
					set(k, "RPUSH", k, "a list")
				}
				bad = append(bad, redlimit.Request{Key: id, Limit: l, Cost: 1})
			}
			set(s.KeyOf("garbled", tb), "SET", s.KeyOf("garbled", tb), "not a bucket")
			bad = append(bad, redlimit.Request{Key: "garbled", Limit: tb, Cost: 1})

			const (
				goodKeys = 24
				perKey   = 2 // goroutines per good key
				tries    = 30
			)
			ctx := context.Background()
			var wg sync.WaitGroup
			admitted := make([]atomic.Int64, goodKeys)
			var failures, policy, badOK, badWrong atomic.Int64
			var firstErr atomic.Value
			for g := range goodKeys * perKey {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := g % goodKeys
					id, l := "good"+strconv.Itoa(k), badKeyLimits[k%len(badKeyLimits)]
					for range tries {
						var res redlimit.Result
						var err error
						if k%5 == 4 {
							// Two limits of one identifier.
							var d redlimit.Decision
							d, err = lim.AllowAll(ctx, []redlimit.Request{{Key: id, Limit: l, Cost: 1}, {Key: id, Limit: longer(l, 2), Cost: 1}})
							if err == nil {
								res = d.Results[0]
								res.Allowed = d.Allowed
							}
						} else {
							res, err = lim.AllowN(ctx, id, l, 1)
						}
						switch {
						case err != nil:
							failures.Add(1)
							firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", id, err))
						case res.Source == redlimit.FromFailOpen || res.Source == redlimit.FromFailClosed || res.Source == redlimit.FromLocal:
							policy.Add(1)
						case res.Allowed:
							admitted[k].Add(1)
						}
					}
				}()
			}
			for g := range 2 * len(bad) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := bad[g%len(bad)]
					for i := range tries {
						var err error
						if i%2 == 0 {
							// With a good limit of the same identifier.
							_, err = lim.AllowAll(ctx, []redlimit.Request{{Key: r.Key, Limit: longer(fw, 2), Cost: 1}, r})
						} else {
							_, err = lim.AllowN(ctx, r.Key, r.Limit, 1)
						}
						switch {
						case err == nil:
							badOK.Add(1)
						case !errors.Is(err, redlimit.ErrKeyState):
							badWrong.Add(1)
							firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", r.Key, err))
						}
					}
				}()
			}
			wg.Wait()
			if n := failures.Load(); n > 0 {
				t.Errorf("%d good-key decisions failed (first: %v)", n, firstErr.Load())
			}
			if n := policy.Load(); n > 0 {
				t.Errorf("%d good-key decisions answered by a failure policy", n)
			}
			if badOK.Load() > 0 || badWrong.Load() > 0 {
				t.Errorf("bad keys: %d decided, %d failed without ErrKeyState (first: %v); want every one ErrKeyState", badOK.Load(), badWrong.Load(), firstErr.Load())
			}
			for k := range goodKeys {
				id, l := "good"+strconv.Itoa(k), badKeyLimits[k%len(badKeyLimits)]
				if got := admitted[k].Load(); got != l.Max() {
					t.Errorf("%s (%v): %d admitted, want %d", id, l, got, l.Max())
				}
				if r, err := s.Peek(ctx, id, l, 1); err != nil || r.Allowed {
					t.Errorf("%s: peek %+v, %v; want a denial: Redis counts %d", id, r, err, l.Max())
				}
			}
			for _, r := range bad {
				gl := longer(fw, 2)
				if res, err := s.Peek(ctx, r.Key, gl, gl.Count); err != nil || !res.Allowed {
					t.Errorf("%s: the good limit of a failed decision of two: peek %+v, %v; want it untouched", r.Key, res, err)
				}
			}
		})
	}
}

// longer returns l with a period f times as long: another state.
func longer(l redlimit.Limit, f time.Duration) redlimit.Limit {
	l.Period *= f
	return l
}

// TestEveryCallReportsKeyState shows that every kind of entry of the batch
// script reports a key it cannot use as ErrKeyState, alone and unbatched:
// AllowN, Peek, AllowAll of two limits, a debit, Admit, DebitOnce, and
// the Refund of a Grant whose key became a string since (but a token
// bucket's, which finds no refund record there and gives nothing back).
func TestEveryCallReportsKeyState(t *testing.T) {
	srv, s := ownServerStore(t, redisstore.WithPrefix("p:"), redisstore.WithBatching(false))
	ctx := context.Background()
	for _, l := range badKeyLimits {
		bad := func(key string) {
			t.Helper()
			if _, err := srv.Do("SET", s.KeyOf(key, l), "a string"); err != nil {
				t.Fatal(err)
			}
		}
		other := redlimit.PerHour(5).FixedWindow()
		grant, err := s.Admit(ctx, []redlimit.Request{{Key: "granted", Limit: l, Cost: 1}})
		if err != nil || !grant.Allowed {
			t.Fatalf("%s: Admit: %+v, %v", l, grant, err)
		}
		for _, k := range []string{"k", "granted"} {
			bad(k)
		}
		calls := map[string]func() error{
			"AllowN": func() error { _, err := s.AllowN(ctx, "k", l, 1); return err },
			"Peek":   func() error { _, err := s.Peek(ctx, "k", l, 1); return err },
			"AllowAll": func() error {
				_, err := s.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: other, Cost: 1}, {Key: "k", Limit: l, Cost: 1}})
				return err
			},
			"debit": func() error {
				_, err := s.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: 1, Debit: true}})
				return err
			},
			"Admit": func() error {
				_, err := s.Admit(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: 1}})
				return err
			},
			"DebitOnce": func() error {
				_, _, err := s.DebitOnce(ctx, redlimit.Request{Key: "k", Limit: l, Cost: 1}, "id")
				return err
			},
			"Refund": func() error { return s.Refund(ctx, grant, []int64{1}) },
		}
		if l.Algorithm == redlimit.TokenBucket {
			if err := s.Refund(ctx, grant, []int64{1}); err != nil {
				t.Errorf("%s, Refund on a string: %v, want nothing given back", l, err)
			}
			delete(calls, "Refund")
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, redlimit.ErrKeyState) {
				t.Errorf("%s, %s on a string: %v, want ErrKeyState", l, name, err)
			}
		}
	}
}
