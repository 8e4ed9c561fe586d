package redlimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

// TestHoldRenews: a holder that outlives the TTL keeps its slot, and
// release frees it.
func TestHoldRenews(t *testing.T) {
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// Renewed every 200ms: the slot holds while a busy machine delays a
	// renewal by up to 400ms.
	c := redlimit.InFlight(1, 600*time.Millisecond)
	l, release, err := redlimit.Hold(ctx, s, "job", c)
	if err != nil || !l.Held {
		t.Fatalf("Hold: %+v, %v", l, err)
	}
	cancel() // the request's end does not stop the renewals
	for range 3 {
		time.Sleep(c.TTL)
		if got, err := s.Acquire(context.Background(), "job", c, "other"); err != nil || got.Held {
			t.Fatalf("the held slot was taken: %+v, %v", got, err)
		}
	}
	release()
	release()
	if got, err := s.Acquire(context.Background(), "job", c, "other"); err != nil || !got.Held {
		t.Fatalf("after release: %+v, %v", got, err)
	}
	l, release, err = redlimit.Hold(context.Background(), s, "job", c)
	if err != nil || l.Held || l.RetryAfter <= 0 {
		t.Fatalf("Hold of a full key: %+v, %v", l, err)
	}
	release()
}

// switched is a client that fails over: its calls go to the store of the
// server it points at now, as a Sentinel client's do.
type switched struct {
	mu sync.Mutex
	s  redlimit.Semaphore
}

func (w *switched) to(s redlimit.Semaphore) { w.mu.Lock(); w.s = s; w.mu.Unlock() }
func (w *switched) cur() redlimit.Semaphore { w.mu.Lock(); defer w.mu.Unlock(); return w.s }

func (w *switched) Acquire(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return w.cur().Acquire(ctx, key, c, id)
}

func (w *switched) Renew(ctx context.Context, key string, c redlimit.Concurrency, id string) (redlimit.Lease, error) {
	return w.cur().Renew(ctx, key, c, id)
}

func (w *switched) Release(ctx context.Context, key string, c redlimit.Concurrency, id string) error {
	return w.cur().Release(ctx, key, c, id)
}

// redisAt returns a store on a client of its own for addr.
func redisAt(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s, err := redisstore.New(cl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHoldRestartAndFailover: N holders run through Hold on two clients
// when Redis loses their leases (a restart without persistence, or a
// failover to a replica that had not received them). Two other clients
// take the freed slots at once. Within a third of the TTL (and a margin)
// Redis counts every holder that runs, checked by a counter outside the
// limiter; new acquires are refused until fewer than N run.
func TestHoldRestartAndFailover(t *testing.T) {
	const clients, fillers = 4, 8 // holders on clients 0 and 1, fillers on 2 and 3
	c := redlimit.InFlight(4, 3*time.Second)
	margin := time.Second
	cases := []struct {
		name string
		// start returns the clients, and lose, which makes Redis lose
		// every lease and points the clients at the Redis that answers.
		start func(t *testing.T) (ws []*switched, lose func() error)
	}{
		{"restart, data lost", func(t *testing.T) ([]*switched, func() error) {
			srv := redistest.Start(t)
			ws := make([]*switched, clients)
			for i := range ws {
				ws[i] = &switched{s: redisAt(t, srv.Addr())}
			}
			return ws, srv.Restart
		}},
		{"failover to a replica without the leases", func(t *testing.T) ([]*switched, func() error) {
			master := redistest.Start(t)
			replica := redistest.Start(t) // cut off before the leases were written
			ws := make([]*switched, clients)
			after := make([]redlimit.Semaphore, clients)
			for i := range ws {
				ws[i] = &switched{s: redisAt(t, master.Addr())}
				after[i] = redisAt(t, replica.Addr())
			}
			return ws, func() error {
				if err := master.Kill(); err != nil {
					return err
				}
				for i, w := range ws {
					w.to(after[i])
				}
				return nil
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, lose := tc.start(t)
			ctx := context.Background()
			var running atomic.Int64 // holders that run, counted outside the limiter
			var mu sync.Mutex
			var releases []func()
			defer func() {
				for _, r := range releases {
					r()
				}
			}()
			hold := func(s redlimit.Semaphore) bool {
				l, release, err := redlimit.Hold(ctx, s, "job", c)
				if err != nil || !l.Held {
					return false
				}
				running.Add(1)
				mu.Lock()
				releases = append(releases, func() { running.Add(-1); release() })
				mu.Unlock()
				return true
			}
			for i := range c.Slots {
				if !hold(ws[i%2]) {
					t.Fatalf("holder %d: no slot", i)
				}
			}
			// inRedis is how many leases Redis counts.
			inRedis := func() int64 {
				l, err := ws[2].Renew(ctx, "job", c, "probe")
				if err != nil {
					return -1
				}
				return l.InFlight
			}
			if err := lose(); err != nil {
				t.Fatal(err)
			}
			lost := time.Now()
			deadline := lost.Add(c.TTL/3 + margin)
			// Other clients take the freed slots, until the deadline.
			var wg sync.WaitGroup
			for i := range fillers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) && !hold(ws[2+i%2]) {
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}
			time.Sleep(time.Until(deadline))
			wg.Wait()
			n, r := inRedis(), running.Load()
			if n != r {
				t.Fatalf("%v after the loss, Redis counts %d leases, %d holders run", time.Since(lost), n, r)
			}
			// Every holder ends in turn; a new acquire holds only once
			// fewer than N run.
			for len(releases) > 0 {
				releases[0]()
				releases = releases[1:]
				id := redlimit.NewLeaseID()
				l, err := ws[3].Acquire(ctx, "job", c, id)
				if err != nil {
					t.Fatal(err)
				}
				if want := running.Load() < c.Slots; l.Held != want {
					t.Fatalf("%d run, Redis counts %d: new acquire held %v", running.Load(), l.InFlight, l.Held)
				}
				if err := ws[3].Release(ctx, "job", c, id); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
