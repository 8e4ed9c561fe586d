package redlimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// limiterOnly hides a store's Queue: a Limiter that cannot queue.
type limiterOnly struct{ redlimit.Limiter }

// TestWaitRetries: the window algorithms, and a token bucket on a Limiter
// that cannot queue, retry after each denial: 10 waiters on 5 per 200ms
// all pass within the maximum wait. No more than 5 pass at once, except
// that a fixed window may admit 5 at the end of one window and 5 at the
// start of the next: there no window admits more than 5.
func TestWaitRetries(t *testing.T) {
	const period = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		limit redlimit.Limit
	}{
		{"fixed_window", redlimit.Per(5, period).FixedWindow()},
		{"sliding_window", redlimit.Per(5, period).SlidingWindow()},
		{"sliding_log", redlimit.Per(5, period).SlidingLog()},
		{"token_bucket unqueued", redlimit.Per(5, period).TokenBucket(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, err := memory.New()
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			lim := limiterOnly{store}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var early int
			perWindow := map[int64]int{}
			start := time.Now()
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := redlimit.Wait(context.Background(), lim, "k", tc.limit, 1, 5*time.Second)
					if err != nil || !res.Allowed {
						t.Errorf("Wait: %+v, %v", res, err)
					}
					mu.Lock()
					defer mu.Unlock()
					if time.Since(start) < 20*time.Millisecond {
						early++
					}
					// Windows are aligned to the Unix epoch; the
					// admitting window ends ResetAfter from now.
					end := time.Now().Add(res.ResetAfter).UnixNano()
					perWindow[(end+int64(period)/2)/int64(period)]++
				}()
			}
			wg.Wait()
			if tc.name == "fixed_window" {
				for w, n := range perWindow {
					if n > 5 {
						t.Errorf("%d admitted in window %d, limit 5", n, w)
					}
				}
				return
			}
			if early > 5 {
				t.Errorf("%d admitted at once, limit 5", early)
			}
		})
	}
}

// TestWaitRefusals: bad waits are errors; a wait beyond maxWait or ctx's
// deadline is a denial at once, taking nothing; a cancelled waiter
// gives its place back.
func TestWaitRefusals(t *testing.T) {
	store, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	l := redlimit.Per(1, time.Second).TokenBucket(1)
	for _, w := range []time.Duration{-1, redlimit.MaxWait + 1} {
		if _, err := redlimit.Wait(ctx, store, "k", l, 1, w); !errors.Is(err, redlimit.ErrInvalidWait) {
			t.Errorf("Wait with maxWait %d: %v, want ErrInvalidWait", w, err)
		}
	}
	if _, err := store.Queue(ctx, "k", redlimit.PerSecond(1), 1, time.Second); !errors.Is(err, redlimit.ErrQueueAlgorithm) {
		t.Errorf("Queue of a sliding window: %v, want ErrQueueAlgorithm", err)
	}
	if res, err := redlimit.Wait(ctx, store, "k", l, 2, time.Second); err != nil || res.Allowed || res.RetryAfter != redlimit.Never {
		t.Errorf("Wait beyond the burst: %+v, %v; want a denial, Never", res, err)
	}
	if res, err := redlimit.Wait(ctx, store, "k", l, 1, time.Second); err != nil || !res.Allowed {
		t.Fatalf("first Wait: %+v, %v", res, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if res, err := redlimit.Wait(dctx, store, "k", l, 1, time.Minute); err != nil || res.Allowed || res.RetryAfter < 500*time.Millisecond {
		t.Errorf("Wait beyond ctx's deadline: %+v, %v; want a denial", res, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a refused Wait took %s: want at once", took)
	}
	// Nothing was taken by the refusals: the next place is as before.
	r, err := store.Queue(ctx, "k", l, 1, time.Minute)
	if err != nil || !r.Allowed || r.Delay > time.Second {
		t.Fatalf("Queue: %+v, %v", r, err)
	}
	cctx, cancel2 := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel2)
	if _, err := redlimit.Wait(cctx, store, "k", l, 1, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
	r2, err := store.Queue(ctx, "k", l, 1, time.Minute)
	if err != nil || r2.TAT != r.TAT+l.EmissionInterval() {
		t.Errorf("after a cancelled Wait, queued at %d (%v), want %d: its place back", r2.TAT, err, r.TAT+l.EmissionInterval())
	}
}
