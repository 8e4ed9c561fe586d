package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// The leases of a flaky store fail as its decisions do.

func (s *flaky) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if s.isDown(key) {
		return redlimit.Lease{}, errDown
	}
	return s.Store.Acquire(ctx, key, c, id)
}

func (s *flaky) Renew(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if s.isDown(key) {
		return redlimit.Lease{}, errDown
	}
	return s.Store.Renew(ctx, key, c, id)
}

func (s *flaky) Release(ctx context.Context, key string, c redlimit.Concurrency, id string) error {
	if s.isDown(key) {
		return errDown
	}
	return s.Store.Release(ctx, key, c, id)
}

// TestRandomOutagesLeases: 2 or 3 nodes share two keys' slots, which fail
// local, and one or two outages come at random, of every key or of one.
// Between outages, Redis may lose every lease, as a restart without
// persistence does. Random steps acquire, renew and release leases on
// random nodes; a holder whose renewal does not hold releases its lease.
// As an outage ends, each lease is renewed: a renewal that Redis answers
// holds. Some steps after a loss, each lease is recorded again, as
// Hold's renewals do: it holds, whatever the key holds. Then Redis soon
// holds every lease held (the ones granted locally included). From then
// until the next outage or loss:
//   - an acquire that holds from Redis leaves at most the slots held
//     (in flight never exceeds the slots);
//   - a held lease's renewal holds, from Redis;
//   - a released lease is in Redis no more.
func TestRandomOutagesLeases(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for seed := range seedCount(16, 4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
			ctx := context.Background()
			prefix := redisstore.WithPrefix(fmt.Sprintf("lm%x:", rand.Uint64()))
			direct := redisStore(t, []string{srv.Addr()}, prefix)
			nodes := 2 + rng.IntN(2)
			down := map[string]bool{}
			stores := make([]*flaky, nodes)
			ls := make([]*resilient.Limiter, nodes)
			for i := range ls {
				stores[i] = &flaky{Store: redisStore(t, []string{srv.Addr()}, prefix), down: map[string]bool{}}
				ls[i] = newLimiter(t, stores[i], resilient.Options{
					Nodes:     fixedNodes(nodes),
					Breaker:   resilient.BreakerOptions{FailureThreshold: 1 + rng.IntN(3), CoolDown: time.Millisecond},
					Reconcile: resilient.ReconcileOptions{Spread: -1},
					Timeout:   5 * time.Second,
				})
			}
			setDown := func(key string, d bool) {
				for _, s := range stores {
					s.mu.Lock()
					s.down[key] = d
					s.mu.Unlock()
				}
				down[key] = d
			}
			keys := []string{"a", "b"}
			c := redlimit.InFlight(int64(2+rng.IntN(5)), time.Minute).OnFailure(redlimit.FailLocal)
			type lease struct {
				node    int
				key, id string
			}
			var held []lease
			heldOn := func(key string) int {
				n := 0
				for _, h := range held {
					if h.key == key {
						n++
					}
				}
				return n
			}
			const steps = 300
			type span struct {
				from, to int
				key      string // "*": every key
			}
			var outages []span
			for from := 20 + rng.IntN(60); from < steps-40; from += 100 + rng.IntN(100) {
				outages = append(outages, span{from, from + 10 + rng.IntN(40), []string{"*", "a"}[rng.IntN(2)]})
			}
			var log []string
			fail := func(step int, format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d step %d: %s\n%v", seed, step, fmt.Sprintf(format, args...), log)
			}
			// up: no outage, and every lease held is in Redis.
			up := true
			// nearOutage: an outage is on, or starts within 30 steps.
			nearOutage := func(step int) bool {
				for _, o := range outages {
					if o.from-30 <= step && step <= o.to {
						return true
					}
				}
				return false
			}
			// Redis lost every lease at step lost, if not -1; the holders
			// record theirs again at step recorded.
			lost, recorded := -1, -1
			for step := range steps {
				if up && lost < 0 && !nearOutage(step) && rng.IntN(40) == 0 {
					for _, h := range held {
						if err := direct.Release(ctx, h.key, c, h.id); err != nil {
							fail(step, "losing %+v: %v", h, err)
						}
					}
					lost, recorded, up = step, step+5+rng.IntN(20), false
					log = append(log, "lost")
				}
				if step == recorded {
					for _, h := range held {
						got, err := redlimit.RecordLease(ctx, ls[h.node], h.key, c, h.id)
						log = append(log, fmt.Sprintf("%d record %s %s: %v %v", h.node, h.key, h.id, got.Held, got.Source))
						if err != nil || !got.Held || got.Source != redlimit.FromStore {
							fail(step, "recording held lease %+v after the loss: %+v, %v", h, got, err)
						}
					}
					for _, h := range held {
						if got, err := direct.Renew(ctx, h.key, c, h.id); err != nil || !got.Held {
							fail(step, "lease %+v held, not in Redis once recorded: %+v, %v", h, got, err)
						}
					}
					lost, up = -1, true
				}
				for _, o := range outages {
					if step == o.from {
						setDown(o.key, true)
						up = false
						log = append(log, "down "+o.key)
					}
					if step == o.to {
						setDown(o.key, false)
						log = append(log, "up "+o.key)
						// A renewal at once holds, if Redis answers it.
						for _, i := range rng.Perm(len(held)) {
							h := held[i]
							got, err := ls[h.node].Renew(ctx, h.key, c, h.id)
							log = append(log, fmt.Sprintf("%d renew %s %s: %v %v", h.node, h.key, h.id, got.Held, got.Source))
							if err != nil || !got.Held && got.Source == redlimit.FromStore {
								fail(step, "renewal of held lease %+v as the outage ended: %+v, %v", h, got, err)
							}
						}
						// Redis soon holds every lease held: the local
						// ones reach it (a renewal by Redis alone tells).
						for _, h := range held {
							if !waitFor(5*time.Second, func() bool {
								got, err := direct.Renew(ctx, h.key, c, h.id)
								return err == nil && got.Held
							}) {
								fail(step, "lease %+v held, not in Redis 5s after the outage", h)
							}
						}
						// And every breaker closes, so that a release
						// reaches Redis (one the breaker keeps back
						// leaves Redis's lease to its TTL).
						if !waitFor(5*time.Second, func() bool {
							closed := true
							for _, l := range ls {
								if l.BreakerState() != "closed" {
									closed = false
									_, _ = l.Allow(ctx, "poke", redlimit.PerMinute(1000))
								}
							}
							return closed
						}) {
							fail(step, "a breaker is not closed 5s after the outage")
						}
						up = true
					}
				}
				node, key := rng.IntN(nodes), keys[rng.IntN(len(keys))]
				l := ls[node]
				switch op := rng.IntN(10); {
				case op < 5 || len(held) == 0:
					id := redlimit.NewLeaseID()[:8]
					got, err := l.Acquire(ctx, key, c, id)
					if err != nil {
						fail(step, "acquire: %v", err)
					}
					log = append(log, fmt.Sprintf("%d acquire %s %s: %v %v", node, key, id, got.Held, got.Source))
					if !got.Held {
						continue
					}
					if up && got.Source == redlimit.FromStore && heldOn(key) >= int(c.Slots) {
						fail(step, "node %d acquired %s from Redis with %d leases held of %d slots", node, key, heldOn(key), c.Slots)
					}
					held = append(held, lease{node, key, id})
				case op < 8:
					i := rng.IntN(len(held))
					h := held[i]
					got, err := ls[h.node].Renew(ctx, h.key, c, h.id)
					if err != nil {
						fail(step, "renew: %v", err)
					}
					log = append(log, fmt.Sprintf("%d renew %s %s: %v %v", h.node, h.key, h.id, got.Held, got.Source))
					if got.Held {
						continue
					}
					if up && got.Source == redlimit.FromStore {
						fail(step, "renewal of held lease %+v lost it", h)
					}
					held = slices.Delete(held, i, i+1)
					if err := ls[h.node].Release(ctx, h.key, c, h.id); err != nil {
						fail(step, "release: %v", err)
					}
				default:
					i := rng.IntN(len(held))
					h := held[i]
					held = slices.Delete(held, i, i+1)
					if err := ls[h.node].Release(ctx, h.key, c, h.id); err != nil {
						fail(step, "release: %v", err)
					}
					log = append(log, fmt.Sprintf("%d release %s %s", h.node, h.key, h.id))
					if !up {
						continue
					}
					if got, err := direct.Renew(ctx, h.key, c, h.id); err != nil || got.Held {
						fail(step, "released lease %+v still in Redis: %+v, %v", h, got, err)
					}
				}
			}
		})
	}
}

// TestLeaseReconcileRace: 2 nodes hold 16 leases each, granted locally in
// an outage. As the store comes back, each holder renews its lease and
// releases it at once, from 32 goroutines, while the nodes' background
// passes give Redis their leases. Each renewal that Redis answers holds,
// and at the end Redis holds no lease: none was given to it after its
// release.
func TestLeaseReconcileRace(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	prefix := redisstore.WithPrefix(fmt.Sprintf("lr%x:", rand.Uint64()))
	direct := redisStore(t, []string{srv.Addr()}, prefix)
	const nodes, per = 2, 16
	c := redlimit.InFlight(nodes*per, time.Minute).OnFailure(redlimit.FailLocal)
	ctx := context.Background()
	for round := range 4 {
		key := fmt.Sprint("k", round)
		stores := make([]*flaky, nodes)
		ls := make([]*resilient.Limiter, nodes)
		for i := range ls {
			stores[i] = &flaky{Store: redisStore(t, []string{srv.Addr()}, prefix), down: map[string]bool{"*": true}}
			ls[i] = newLimiter(t, stores[i], resilient.Options{
				Nodes:     fixedNodes(nodes),
				Breaker:   resilient.BreakerOptions{CoolDown: time.Millisecond},
				Reconcile: resilient.ReconcileOptions{Spread: -1},
				Timeout:   5 * time.Second,
			})
		}
		ids := make([][]string, nodes)
		for i, l := range ls {
			for range per {
				id := redlimit.NewLeaseID()
				if got, err := l.Acquire(ctx, key, c, id); err != nil || !got.Held || got.Source != redlimit.FromLocal {
					t.Fatalf("node %d in the outage: %+v, %v", i, got, err)
				}
				ids[i] = append(ids[i], id)
			}
		}
		for _, s := range stores {
			s.mu.Lock()
			s.down["*"] = false
			s.mu.Unlock()
		}
		var wg sync.WaitGroup
		for i, l := range ls {
			for _, id := range ids[i] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := l.Renew(ctx, key, c, id)
					if err != nil || !got.Held && got.Source == redlimit.FromStore {
						t.Errorf("round %d node %d: renewal: %+v, %v", round, i, got, err)
					}
					if err := l.Release(ctx, key, c, id); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		// The background passes end (nothing is left to give).
		for _, l := range ls {
			l.Close()
		}
		if got, err := direct.Renew(ctx, key, c, "none"); err != nil || got.InFlight != 0 {
			t.Fatalf("round %d: Redis holds %d leases after every one was released (%v)", round, got.InFlight, err)
		}
	}
}
