package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// pipelinedStore returns a store on a server of its own, on one pipelined
// connection with its script loaded, as in TestBatchCancellation: there a
// cancellation ends a call at once.
func pipelinedStore(t *testing.T) (*redistest.Server, *redisstore.Store) {
	t.Helper()
	srv, s := ownServerStoreWith(t, rueidis.ClientOption{PipelineMultiplex: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.AllowN(ctx, "warm", redlimit.PerHour(1).FixedWindow(), 1); err != nil {
		t.Fatal(err)
	}
	return srv, s
}

// TestGivenUpLeavesQueue: while Redis hangs (SIGSTOP of the test's own
// server) with both calls of the batcher in flight, many callers with
// short deadlines queue and give up. Each returns its context's error
// promptly, and the queue holds no more than those still waiting (given
// up ones once held every caller's entry, context and request, until a
// call in flight answered). When Redis resumes, the two callers in flight
// get their answers, and nothing a caller gave up is counted: it was
// never sent.
func TestGivenUpLeavesQueue(t *testing.T) {
	t.Parallel()
	srv, s := pipelinedStore(t)
	l := redlimit.PerHour(1000).FixedWindow()
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

// TestHangGiveUpGenerator is the generator of TestGivenUpLeavesQueue's
// class: random rounds in which Redis hangs (SIGSTOP of the test's own
// server) for a random span while random callers (a short deadline, a
// cancellation, or none) decide on a few keys, then resumes. Every caller
// with a context that ends returns by then, with its context's error or
// an answer; the queue never holds more than twice the callers plus one;
// and after each round every key counts at least the admissions answered
// and at most those plus the callers that gave up.
func TestHangGiveUpGenerator(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	srv, s := pipelinedStore(t)
	l := redlimit.PerHour(100000).FixedWindow()
	const callers = 12
	keys := []string{"g0", "g1", "g2"}
	var allowed, gaveUp [3]atomic.Int64
	for round := range 3 {
		hang := time.Duration(100+rng.IntN(700)) * time.Millisecond
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			longest int
			failed  []string
		)
		end := time.Now().Add(hang)
		for c := range callers {
			kind, ki := rng.IntN(3), rng.IntN(len(keys))
			wait := time.Duration(1+rng.IntN(30)) * time.Millisecond
			wg.Go(func() {
				for first := true; first || time.Now().Before(end); first = false {
					var ctx context.Context
					var cancel context.CancelFunc
					switch kind {
					case 0:
						ctx, cancel = context.WithTimeout(context.Background(), wait)
					case 1:
						ctx, cancel = context.WithCancel(context.Background())
						time.AfterFunc(wait, cancel)
					default:
						ctx, cancel = context.Background(), func() {}
					}
					start := time.Now()
					r, err := s.AllowN(ctx, keys[ki], l, 1)
					took := time.Since(start)
					cancel()
					mu.Lock()
					longest = max(longest, s.BatchQueueLen())
					switch {
					case err == nil && r.Allowed:
						allowed[ki].Add(1)
					case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
						gaveUp[ki].Add(1)
					default:
						failed = append(failed, fmt.Sprintf("caller %d: %+v, %v", c, r, err))
					}
					// A wide margin for a busy machine.
					if kind != 2 && took > wait+2*time.Second {
						failed = append(failed, fmt.Sprintf("caller %d with a %s context returned after %s", c, wait, took))
					}
					mu.Unlock()
					if kind == 2 {
						return // waits for the resume
					}
				}
			})
		}
		time.Sleep(time.Until(end))
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		waitUntil(t, "the batcher is idle", func() bool { n, w, _ := s.BatchState(); return n == 0 && w == 0 })
		if len(failed) > 0 {
			t.Fatalf("seed %d, round %d (hang %s): %q", seed, round, hang, failed)
		}
		if longest > 2*callers+1 {
			t.Fatalf("seed %d, round %d (hang %s): %d callers, the queue held %d decisions", seed, round, hang, callers, longest)
		}
		for i, k := range keys {
			r, err := s.Peek(context.Background(), k, l, 1)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := s.Peek(context.Background(), fmt.Sprintf("fresh%d.%d", round, i), l, 1)
			if err != nil {
				t.Fatal(err)
			}
			used, a, g := fresh.Remaining-r.Remaining, allowed[i].Load(), gaveUp[i].Load()
			if used < a || used > a+g {
				t.Fatalf("seed %d, round %d: key %s counts %d, with %d admissions answered and %d given up", seed, round, k, used, a, g)
			}
		}
	}
}
