package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// TestLeaseSteps walks a semaphore of two slots through acquire, renew,
// release and expiry on every deployment, with an injected clock.
func TestLeaseSteps(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := time.Unix(1_900_000_000, 0)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(dt time.Duration) { mu.Lock(); now = now.Add(dt); mu.Unlock() }
			s := d.store(t, redisstore.WithPrefix(prefix(t)), redisstore.WithClock(clock))
			ctx := context.Background()
			c := redlimit.InFlight(2, time.Second)
			steps := []struct {
				op       string
				id       string
				advance  time.Duration
				held     bool
				inFlight int64
				retry    time.Duration
			}{
				{"acquire", "a", 0, true, 1, 0},
				{"acquire", "b", 100 * time.Millisecond, true, 2, 0},
				{"acquire", "c", 0, false, 2, 900 * time.Millisecond},
				{"acquire", "a", 0, true, 2, 0}, // a retry renews
				{"renew", "c", 0, false, 2, time.Second},
				{"release", "b", 0, false, 1, 0},
				{"acquire", "c", 0, true, 2, 0},
				{"acquire", "d", 0, false, 2, time.Second},
				{"renew", "c", 500 * time.Millisecond, true, 2, 0},
				{"acquire", "d", 600 * time.Millisecond, true, 2, 0}, // a expired
				{"renew", "a", 0, false, 2, 400 * time.Millisecond},
				{"release", "a", 0, false, 2, 0},
				{"acquire", "e", 2 * time.Second, true, 1, 0}, // all expired
			}
			for i, st := range steps {
				advance(st.advance)
				var l redlimit.Lease
				var err error
				switch st.op {
				case "acquire":
					l, err = s.Acquire(ctx, "job", c, st.id)
				case "renew":
					l, err = s.Renew(ctx, "job", c, st.id)
				case "release":
					err = s.Release(ctx, "job", c, st.id)
				}
				if err != nil {
					t.Fatalf("step %d %s %s: %v", i, st.op, st.id, err)
				}
				if st.op == "release" {
					continue
				}
				want := redlimit.Lease{Held: st.held, InFlight: st.inFlight, RetryAfter: st.retry}
				if l != want {
					t.Fatalf("step %d %s %s: got %+v, want %+v", i, st.op, st.id, l, want)
				}
			}
		})
	}
}

// TestLeaseBadInput: bad input is a clear error, and touches nothing.
func TestLeaseBadInput(t *testing.T) {
	s := deployments[0].store(t, redisstore.WithPrefix(prefix(t)))
	ctx := context.Background()
	cases := []struct {
		name string
		key  string
		c    redlimit.Concurrency
		id   string
		want error
	}{
		{"empty key", "", redlimit.InFlight(1, time.Second), "a", redlimit.ErrInvalidKey},
		{"no slots", "k", redlimit.InFlight(0, time.Second), "a", redlimit.ErrInvalidConcurrency},
		{"negative slots", "k", redlimit.InFlight(-3, time.Second), "a", redlimit.ErrInvalidConcurrency},
		{"too many slots", "k", redlimit.InFlight(redlimit.MaxSlots+1, time.Second), "a", redlimit.ErrInvalidConcurrency},
		{"TTL too short", "k", redlimit.InFlight(1, time.Millisecond), "a", redlimit.ErrInvalidConcurrency},
		{"TTL too long", "k", redlimit.InFlight(1, 25*time.Hour), "a", redlimit.ErrInvalidConcurrency},
		{"TTL not whole µs", "k", redlimit.InFlight(1, time.Second+1), "a", redlimit.ErrInvalidConcurrency},
		{"empty id", "k", redlimit.InFlight(1, time.Second), "", redlimit.ErrInvalidLeaseID},
		{"long id", "k", redlimit.InFlight(1, time.Second), string(make([]byte, 65)), redlimit.ErrInvalidLeaseID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Acquire(ctx, tc.key, tc.c, tc.id); !errors.Is(err, tc.want) {
				t.Errorf("Acquire: %v, want %v", err, tc.want)
			}
			if _, err := s.Renew(ctx, tc.key, tc.c, tc.id); !errors.Is(err, tc.want) {
				t.Errorf("Renew: %v, want %v", err, tc.want)
			}
			if err := s.Release(ctx, tc.key, tc.c, tc.id); !errors.Is(err, tc.want) {
				t.Errorf("Release: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestLeaseKeyState: a lease key of another type fails that call alone.
func TestLeaseKeyState(t *testing.T) {
	d := deployments[0]
	p := prefix(t)
	s := d.store(t, redisstore.WithPrefix(p))
	d.do(t, "", "SET", p+"{bad}:lease", "x")
	if _, err := s.Acquire(context.Background(), "bad", redlimit.InFlight(1, time.Second), "a"); !errors.Is(err, redlimit.ErrKeyState) {
		t.Fatalf("Acquire on a string key: %v, want ErrKeyState", err)
	}
	if l, err := s.Acquire(context.Background(), "good", redlimit.InFlight(1, time.Second), "a"); err != nil || !l.Held {
		t.Fatalf("Acquire on another key: %+v, %v", l, err)
	}
}

// TestLeaseNeverOverN: 4 clients × 64 goroutines on one key never hold
// more than N slots at once, by a counter outside the limiter.
func TestLeaseNeverOverN(t *testing.T) {
	for _, d := range deployments[:3:3] {
		t.Run(d.name, func(t *testing.T) {
			p := prefix(t)
			const n, clients, workers, rounds = 5, 4, 64, 6
			c := redlimit.InFlight(n, 10*time.Second)
			var in, most, held atomic.Int64
			var wg sync.WaitGroup
			for i := range clients {
				s := d.store(t, redisstore.WithPrefix(p))
				for j := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx := context.Background()
						for r := range rounds {
							id := fmt.Sprintf("%d-%d-%d", i, j, r)
							l, err := s.Acquire(ctx, "tenant", c, id)
							if err != nil {
								t.Error(err)
								return
							}
							if !l.Held {
								continue
							}
							held.Add(1)
							x := in.Add(1)
							for m := most.Load(); x > m && !most.CompareAndSwap(m, x); m = most.Load() {
							}
							time.Sleep(time.Millisecond)
							in.Add(-1)
							if err := s.Release(ctx, "tenant", c, id); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			if most.Load() > n {
				t.Fatalf("%d in flight at once, limit %d", most.Load(), n)
			}
			if held.Load() < n {
				t.Fatalf("only %d leases held in all", held.Load())
			}
			t.Logf("%d leases held, at most %d at once", held.Load(), most.Load())
		})
	}
}

// TestLeaseBatch: lease entries in a batch (batch.lua's path) answer as
// lone calls do, one after another.
func TestLeaseBatch(t *testing.T) {
	s := deployments[0].store(t, redisstore.WithPrefix(prefix(t)))
	c := redlimit.InFlight(2, time.Minute)
	got, err := s.AcquireBatch(context.Background(), "k", c, "a", "b", "a", "c")
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, false}
	for i, l := range got {
		if l.Held != want[i] || l.InFlight != min(int64(i+1), 2) {
			t.Errorf("entry %d: %+v, want held %v", i, l, want[i])
		}
	}
}
