package redisstore_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
)

// TestGivenUpLeavesQueue: while Redis hangs (SIGSTOP of the test's own
// server) with both calls of the batcher in flight, many callers with
// short deadlines queue and give up. Each returns its context's error
// promptly, and the queue holds no more than those still waiting (given
// up ones once held every caller's pending, context and request, until a
// call in flight answered). When Redis resumes, the two callers in flight
// get their answers, and nothing a caller gave up is counted: it was
// never sent.
func TestGivenUpLeavesQueue(t *testing.T) {
	t.Parallel()
	// One pipelined connection, as in TestBatchCancellation.
	srv, s := ownServerStoreWith(t, rueidis.ClientOption{PipelineMultiplex: -1})
	l := redlimit.PerHour(1000).FixedWindow()
	warm, cancelWarm := context.WithCancel(context.Background())
	defer cancelWarm()
	if _, err := s.AllowN(warm, "warm", l, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume() // a second SIGCONT does nothing
	held1 := goAllow(s, context.Background(), "held1", l)
	waitUntil(t, "the first call is in flight", func() bool { n, _, _ := s.BatchState(); return n == 1 })
	held2 := goAllow(s, context.Background(), "held2", l)
	waitUntil(t, "the second call is in flight", func() bool { n, _, _ := s.BatchState(); return n == 2 })

	const (
		callers = 8
		timeout = 5 * time.Millisecond
		giveUps = 800 // without the bound, the queue would hold them all
	)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var (
		gaveUp  atomic.Int64
		mu      sync.Mutex
		slowest time.Duration
		wrong   error
		longest int
		wg      sync.WaitGroup
		stop    = time.Now().Add(20 * time.Second)
	)
	for range callers {
		wg.Go(func() {
			for gaveUp.Load() < giveUps && time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				r, err := s.AllowN(ctx, "given", l, 1)
				took := time.Since(start)
				cancel()
				mu.Lock()
				slowest = max(slowest, took)
				if !errors.Is(err, context.DeadlineExceeded) && wrong == nil {
					wrong = err
					if err == nil {
						t.Errorf("a caller on a hung Redis got %+v, no error", r)
					}
				}
				longest = max(longest, s.BatchQueueLen())
				mu.Unlock()
				gaveUp.Add(1)
			}
		})
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := gaveUp.Load()
	t.Logf("%d callers gave up; the queue held at most %d; heap kept %+d B", n, longest, int64(after.HeapAlloc)-int64(before.HeapAlloc))
	if wrong != nil {
		t.Errorf("a caller that gave up got %v; want context.DeadlineExceeded", wrong)
	}
	// A wide margin for a busy machine: without the bound a caller waits
	// for Redis, hung until the test resumes it.
	if slowest > timeout+2*time.Second {
		t.Errorf("a caller with a %s deadline returned after %s", timeout, slowest)
	}
	if n < giveUps {
		t.Fatalf("only %d callers gave up in 20 s", n)
	}
	// At most twice the callers waiting, plus one, given up or not.
	if longest > 2*callers+1 {
		t.Errorf("%d callers, %d of them given up: the queue held %d decisions", callers, n, longest)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []chan answer{held1, held2} {
		if a := receive(t, "a caller in flight", h); a.err != nil || !a.r.Allowed {
			t.Fatalf("a caller in flight when Redis resumed: %+v, %v; want allowed", a.r, a.err)
		}
	}
	waitUntil(t, "the batcher is idle", func() bool { n, w, _ := s.BatchState(); return n == 0 && w == 0 })
	if got := s.BatchQueueLen(); got != 0 {
		t.Errorf("the idle batcher's queue holds %d decisions", got)
	}
	// The key peeks as one never touched does.
	var peeks [2]redlimit.Result
	for i, k := range []string{"given", "never"} {
		r, err := s.Peek(context.Background(), k, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		peeks[i] = r
	}
	if peeks[0].Allowed != peeks[1].Allowed || peeks[0].Remaining != peeks[1].Remaining {
		t.Errorf("%d callers gave up before being sent, yet their key peeks %+v, an untouched one %+v", n, peeks[0], peeks[1])
	}
	if r, err := s.AllowN(context.Background(), "given", l, 1); err != nil || !r.Allowed || r.Remaining != l.Count-1 {
		t.Errorf("after Redis resumed: %+v, %v; want allowed, %d remaining", r, err, l.Count-1)
	}
}
