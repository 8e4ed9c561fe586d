package resilient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

// TestLeaseReconcile: 3 nodes (each its own client) share 6 slots that fail
// local. Redis is stopped (SIGSTOP): each node holds its share, 2 leases,
// by itself. Redis resumes; a node renews one of its leases, another
// acquires on another key, the third makes no call: Redis must soon count
// every lease of the outage. Then 3 × 8 goroutines acquire and release,
// and half of the outage's leases are released: in flight (a counter
// outside the limiter) never exceeds 6. Each outage lease's renewal holds,
// from Redis, and its release frees a slot in Redis.
func TestLeaseReconcile(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const nodes, slots = 3, 6
	c := redlimit.InFlight(slots, time.Minute).OnFailure(redlimit.FailLocal)
	const key = "jobs"
	prefix := redisstore.WithPrefix(fmt.Sprintf("r%x:", rand.Uint64())) // every node's
	ls := make([]*resilient.Limiter, nodes)
	for i := range ls {
		ls[i] = newLimiter(t, redisStore(t, []string{srv.Addr()}, prefix), resilient.Options{
			Nodes:     fixedNodes(nodes),
			Timeout:   200 * time.Millisecond,
			Breaker:   resilient.BreakerOptions{FailureThreshold: 1, CoolDown: 20 * time.Millisecond},
			Reconcile: resilient.ReconcileOptions{Spread: -1},
		})
	}
	ctx := context.Background()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	var inFlight atomic.Int64
	outage := make([][]string, nodes) // the ids each node holds by itself
	for i, l := range ls {
		for try := 0; try < 10 && len(outage[i]) < slots/nodes+1; try++ {
			id := redlimit.NewLeaseID()
			got, err := l.Acquire(ctx, key, c, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Held {
				if got.Source != redlimit.FromLocal {
					t.Fatalf("node %d: held from %v with Redis stopped", i, got.Source)
				}
				outage[i] = append(outage[i], id)
				inFlight.Add(1)
			}
		}
		if len(outage[i]) != slots/nodes {
			t.Fatalf("node %d held %d leases in the outage, want its share %d", i, len(outage[i]), slots/nodes)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// Node 0 renews one of its leases, node 1 acquires on another key,
	// node 2 makes no call: its leases go to Redis in the background. A
	// probe sent while Redis was stopped may fail after it resumed: the
	// calls are made again until Redis answers them.
	fromStore := func(call func() (redlimit.Lease, error)) (got redlimit.Lease, err error) {
		waitFor(5*time.Second, func() bool {
			got, err = call()
			return err != nil || got.Source == redlimit.FromStore
		})
		return got, err
	}
	if got, err := fromStore(func() (redlimit.Lease, error) { return ls[0].Renew(ctx, key, c, outage[0][0]) }); err != nil || !got.Held || got.Source != redlimit.FromStore {
		t.Errorf("node 0: first renewal of an outage lease after it: %+v, %v; want held from the store", got, err)
	}
	if got, err := fromStore(func() (redlimit.Lease, error) { return ls[1].Acquire(ctx, "other", c, "x") }); err != nil || !got.Held || got.Source != redlimit.FromStore {
		t.Errorf("node 1: first acquire after the outage: %+v, %v; want held from the store", got, err)
	}
	// Redis counts the outage's leases (a renewal of an id it does not
	// know tells how many it holds).
	direct := redisStore(t, []string{srv.Addr()}, prefix)
	if !waitFor(5*time.Second, func() bool {
		got, err := direct.Renew(ctx, key, c, "none")
		return err == nil && got.InFlight == slots
	}) {
		got, err := direct.Renew(ctx, key, c, "none")
		t.Errorf("Redis holds %d leases after the outage, want %d (%v)", got.InFlight, slots, err)
	}
	// The load, and the release of half of the outage's leases.
	var mu sync.Mutex
	var over []string
	note := func(n int64, what string) {
		if n > slots {
			mu.Lock()
			over = append(over, fmt.Sprintf("%d in flight (%s)", n, what))
			mu.Unlock()
		}
	}
	var acquired atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i, l := range ls {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					id := redlimit.NewLeaseID()
					got, err := l.Acquire(ctx, key, c, id)
					if err != nil {
						t.Error(err)
						return
					}
					if !got.Held {
						time.Sleep(time.Millisecond)
						continue
					}
					acquired.Add(1)
					note(inFlight.Add(1), fmt.Sprintf("node %d acquired from %v", i, got.Source))
					time.Sleep(2 * time.Millisecond)
					inFlight.Add(-1) // before the slot is freed: the counter never lags it
					if err := l.Release(ctx, key, c, id); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	time.Sleep(300 * time.Millisecond)
	for i, l := range ls {
		inFlight.Add(-1)
		if err := l.Release(ctx, key, c, outage[i][1]); err != nil {
			t.Fatal(err)
		}
	}
	// Those releases freed slots in Redis: the load takes them.
	if !waitFor(5*time.Second, func() bool { return acquired.Load() > 0 }) {
		t.Errorf("no lease acquired after half of the outage's leases were released")
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	for i, l := range ls {
		got, err := l.Renew(ctx, key, c, outage[i][0])
		if err != nil || !got.Held || got.Source != redlimit.FromStore {
			t.Errorf("node %d: renewal of an outage lease after the load: %+v, %v; want held from the store", i, got, err)
		}
	}
	if len(over) > 0 {
		t.Errorf("%d acquisitions over %d slots after Redis came back, first: %s", len(over), slots, over[0])
	}
	// Each release of an outage lease freed its slot in Redis: the 3
	// left hold 3 of the 6 slots.
	for i, l := range ls {
		if err := l.Release(ctx, key, c, outage[i][0]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ls[0].Acquire(ctx, key, c, "after")
	if err != nil || !got.Held || got.InFlight != 1 {
		t.Errorf("after every outage lease was released: %+v, %v; want the only lease in flight", got, err)
	}
}

// The slow pass: leases granted locally while Redis is down (killed),
// and Redis back paused, so that the pass sending them waits there. The
// breaker probes a second after its last failure: rarely between Redis's
// restart and its pause, mostly during the pause.
const (
	slowPassTTL      = 6 * time.Second
	slowPassPause    = 2500 * time.Millisecond
	slowPassCoolDown = time.Second
)

// slowPass is a node holding ids locally on key, with Redis paused.
type slowPass struct {
	l        *resilient.Limiter
	srv      *redistest.Server
	direct   *redisstore.Store // Redis, without the node
	c        redlimit.Concurrency
	localEnd time.Time // the local leases end by then
}

// startSlowPass grants ids locally on key, in order, then restarts Redis
// paused. The caller resumes it.
func startSlowPass(t *testing.T, key string, ids ...string) slowPass {
	t.Helper()
	p := slowPass{srv: redistest.Start(t), c: redlimit.InFlight(int64(len(ids)), slowPassTTL).OnFailure(redlimit.FailLocal)}
	prefix := redisstore.WithPrefix(fmt.Sprintf("r%x:", rand.Uint64()))
	p.l = newLimiter(t, redisStore(t, []string{p.srv.Addr()}, prefix), resilient.Options{
		Nodes:     fixedNodes(1),
		Timeout:   2 * slowPassPause, // the send waiting in the paused Redis succeeds
		Breaker:   resilient.BreakerOptions{FailureThreshold: 1, CoolDown: slowPassCoolDown},
		Reconcile: resilient.ReconcileOptions{Spread: -1},
	})
	p.direct = redisStore(t, []string{p.srv.Addr()}, prefix)
	if err := p.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		got, err := p.l.Acquire(context.Background(), key, p.c, id)
		if err != nil || !got.Held || got.Source != redlimit.FromLocal {
			t.Fatalf("acquire %s with Redis down: %+v, %v; want held locally", id, got, err)
		}
	}
	p.localEnd = time.Now().Add(slowPassTTL)
	if err := p.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLeaseReconcileTimeLeft: a node holds 2 leases by itself; the send
// of the first waits in the paused Redis. Once Redis resumes, the second
// lease must get the time it has left locally then, not the time it had
// when the pass listed it. Else it holds a slot in Redis after its
// holder's TTL ended.
func TestLeaseReconcileTimeLeft(t *testing.T) {
	t.Parallel()
	const key = "jobs"
	p := startSlowPass(t, key, "a", "b")
	time.Sleep(slowPassPause)
	if err := p.srv.Resume(); err != nil {
		t.Fatal(err)
	}
	inRedis := func() int64 {
		got, err := p.direct.Renew(context.Background(), key, p.c, "none")
		if err != nil {
			t.Fatal(err)
		}
		return got.InFlight
	}
	if !waitFor(slowPassTTL, func() bool { return inRedis() == 2 }) {
		t.Fatalf("Redis holds %d of the outage's 2 leases", inRedis())
	}
	// The first send waited in Redis: its lease may outlive its holder's
	// TTL there. The second was sent after Redis resumed.
	time.Sleep(time.Until(p.localEnd.Add(300 * time.Millisecond)))
	if n := inRedis(); n > 1 {
		t.Errorf("Redis holds %d outage leases 300ms after their local TTL ended, want at most 1 (the one whose send waited)", n)
	}
}

// TestLeaseReconcileRenewedMeanwhile: a node holds leases y and x by
// itself; the pass sending them waits in the paused Redis. x's holder
// renews it meanwhile; its call cannot wait for the pass, so the local
// fallback renews x. Once Redis resumes, the pass must not leave x with
// the time it had before that renewal: a renewal that held must hold
// until its TTL ends.
func TestLeaseReconcileRenewedMeanwhile(t *testing.T) {
	t.Parallel()
	const key = "jobs"
	p := startSlowPass(t, key, "y", "x") // y ends first: it is sent first
	ctx := context.Background()
	time.Sleep(slowPassCoolDown + 500*time.Millisecond) // the pass has listed x
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	got, err := p.l.Renew(rctx, key, p.c, "x")
	cancel()
	if err != nil || !got.Held || got.Source != redlimit.FromLocal {
		t.Fatalf("renewal of x during the pass: %+v, %v; want held locally", got, err)
	}
	time.Sleep(slowPassPause - slowPassCoolDown - 500*time.Millisecond)
	if err := p.srv.Resume(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(p.localEnd.Add(300 * time.Millisecond)))
	if got, err := p.l.Renew(ctx, key, p.c, "x"); err != nil || !got.Held {
		t.Errorf("renewal of x after the TTL of its acquire, within its renewal's: %+v, %v; want held", got, err)
	}
}

// sendOnly is a store whose lease calls fail, but an acquire made with
// a context carrying sendOnly{}: the release's own sends.
type sendOnly struct{ *redisstore.Store }

func (s sendOnly) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	if ctx.Value(sendOnly{}) == nil {
		return redlimit.Lease{}, errDown
	}
	return s.Store.Acquire(ctx, key, c, id)
}

func (s sendOnly) Release(context.Context, string, redlimit.Concurrency, string) error {
	return errDown
}

// TestLeaseReconcileReleaseNotSent: a lease granted locally while the
// store failed is released. The store records leases again, then fails
// the release. The lease was never in the store: its release must not
// put it there for the rest of its TTL.
func TestLeaseReconcileReleaseNotSent(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	c := redlimit.InFlight(2, time.Minute).OnFailure(redlimit.FailLocal)
	const key = "jobs"
	prefix := redisstore.WithPrefix(fmt.Sprintf("r%x:", rand.Uint64()))
	l := newLimiter(t, sendOnly{redisStore(t, []string{srv.Addr()}, prefix)}, resilient.Options{
		Nodes:     fixedNodes(1),
		Breaker:   resilient.BreakerOptions{FailureThreshold: 1 << 20}, // stays closed
		Reconcile: resilient.ReconcileOptions{Spread: -1},
	})
	ctx := context.Background()
	got, err := l.Acquire(ctx, key, c, "x")
	if err != nil || !got.Held || got.Source != redlimit.FromLocal {
		t.Fatalf("acquire with the store failing: %+v, %v; want held locally", got, err)
	}
	if err := l.Release(context.WithValue(ctx, sendOnly{}, true), key, c, "x"); err != nil {
		t.Fatal(err)
	}
	direct := redisStore(t, []string{srv.Addr()}, prefix)
	if got, err := direct.Renew(ctx, key, c, "none"); err != nil || got.InFlight != 0 {
		t.Errorf("Redis after the release of a lease only local: %d leases, %v; want none", got.InFlight, err)
	}
}
