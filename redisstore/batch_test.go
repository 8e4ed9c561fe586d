package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// ownServerStore returns a server of its own, whose command statistics
// only this test moves, and a Store on it through rueidis.
func ownServerStore(t *testing.T, opts ...redisstore.Option) (*redistest.Server, *redisstore.Store) {
	t.Helper()
	return ownServerStoreWith(t, rueidis.ClientOption{}, opts...)
}

// ownServerStoreWith is ownServerStore with the client's options copt (its
// address set here).
func ownServerStoreWith(t *testing.T, copt rueidis.ClientOption, opts ...redisstore.Option) (*redistest.Server, *redisstore.Store) {
	t.Helper()
	srv := redistest.Start(t)
	copt.InitAddress, copt.DisableCache = []string{srv.Addr()}, true
	c, err := rueidis.NewClient(copt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, s
}

// scriptCalls returns how many script calls (EVALSHA and EVAL) srv has run
// since its statistics were reset, not counting those that failed.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			rest, ok := strings.CutPrefix(line, cmd)
			if !ok {
				continue
			}
			// calls=3,usec=109,...,failed_calls=1: an EVALSHA refused with
			// NOSCRIPT (and then sent as EVAL) ran no script.
			for _, f := range strings.Split(rest, ",") {
				name, v, _ := strings.Cut(f, "=")
				if name != "calls" && name != "failed_calls" {
					continue
				}
				c, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				if name == "failed_calls" {
					c = -c
				}
				n += c
			}
		}
	}
	return n
}

// TestBatchesForm shows that concurrent decisions share script calls, and
// that a hot key is still exact: 64 goroutines on one key admit exactly
// the limit, in fewer script calls than decisions. With batching off,
// every decision is a call of its own.
func TestBatchesForm(t *testing.T) {
	const (
		workers = 64
		tries   = 40
		limit   = 1000
	)
	for _, on := range []bool{true, false} {
		t.Run("batching="+strconv.FormatBool(on), func(t *testing.T) {
			t.Parallel()
			srv, s := ownServerStore(t, redisstore.WithBatching(on))
			l := redlimit.Per(limit, redlimit.MaxPeriod).FixedWindow()
			if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil { // loads the script
				t.Fatal(err)
			}
			if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
				t.Fatal(err)
			}
			// The callers start while Redis is paused, so that they are all
			// waiting when it resumes, however the scheduler of a loaded
			// machine runs them: batches form from the first call on, and
			// keep forming while the callers come straight back.
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range tries {
						r, err := s.AllowN(context.Background(), "hot", l, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			time.Sleep(200 * time.Millisecond)
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if inflight, waiting, flying := s.BatchState(); inflight != 0 || waiting != 0 || flying != 0 {
				t.Errorf("after every answer: %d calls and %d decisions in flight, %d waiting; want none", inflight, flying, waiting)
			}
			if got := admitted.Load(); got != limit {
				t.Errorf("admitted %d of %d, want exactly %d", got, workers*tries, limit)
			}
			calls := scriptCalls(t, srv)
			t.Logf("%d decisions in %d script calls", workers*tries, calls)
			// Half the calls at most: well clear of one a decision, and of
			// what a loaded machine's scheduling can make of the rounds
			// after the first (177 to 478 calls for 2,560 decisions seen).
			if on && calls > workers*tries/2 {
				t.Errorf("%d script calls for %d concurrent decisions: batches did not form", calls, workers*tries)
			}
			if !on && calls != workers*tries {
				t.Errorf("%d script calls for %d decisions without batching, want one each", calls, workers*tries)
			}
		})
	}
}

// TestLoneCallerGoesAtOnce shows that a caller alone is not held back for
// a batch: each of its decisions is one script call, made by the caller
// itself, with nothing left queued between calls.
func TestLoneCallerGoesAtOnce(t *testing.T) {
	srv, s := ownServerStore(t)
	l := redlimit.PerHour(1).TokenBucket(1000)
	if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		r, err := s.AllowN(context.Background(), "lone", l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed || r.Remaining != int64(999-i) {
			t.Fatalf("decision %d: %+v, want allowed with %d remaining", i, r, 999-i)
		}
		if inflight, waiting, _ := s.BatchState(); inflight != 0 || waiting != 0 {
			t.Fatalf("after decision %d: %d calls in flight, %d waiting; want idle", i, inflight, waiting)
		}
	}
	if calls := scriptCalls(t, srv); calls != n {
		t.Errorf("%d script calls for %d decisions one after another, want %d", calls, n, n)
	}
}

// TestSecondCallGoesWhenHalfWait shows when a second call goes while one
// is in flight: once at least as many decisions wait as are in play
// besides (see batcher.early). With the server paused, caller 1's call is
// in flight; caller 2 waits alone, as many as are in flight, so its call
// goes at once; callers 3 to 6 then wait for one of the two to answer,
// as no third call goes. When the server resumes, the one key's limit of
// 3 admits callers 1 and 2 (in either order: their calls may take two of
// rueidis's connections, which the server reads in either order), then
// caller 3, in three script calls, and the batcher is idle again with
// nothing counted in flight.
func TestSecondCallGoesWhenHalfWait(t *testing.T) {
	t.Parallel()
	// One connection, so that the server reads the calls in the order
	// they were written: with rueidis's four, caller 2's call could wait
	// on a connection's handshake while callers 3 to 6 went on another
	// and were decided first (seen once in make test).
	srv, s := ownServerStoreWith(t, rueidis.ClientOption{PipelineMultiplex: -1})
	l := redlimit.PerHour(3).FixedWindow()
	if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume() // a second SIGCONT does nothing
	var answers []chan answer
	for i, want := range []struct{ inflight, waiting int }{{1, 0}, {2, 0}, {2, 1}, {2, 2}, {2, 3}, {2, 4}} {
		answers = append(answers, goAllow(s, context.Background(), "k", l))
		waitUntil(t, fmt.Sprintf("caller %d is in flight or waits", i+1), func() bool {
			inflight, waiting, _ := s.BatchState()
			return inflight == want.inflight && waiting == want.waiting
		})
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	got := make([]redlimit.Result, len(answers))
	for i, ch := range answers {
		a := receive(t, fmt.Sprintf("caller %d", i+1), ch)
		if a.err != nil {
			t.Fatalf("caller %d: %v", i+1, a.err)
		}
		got[i] = a.r
	}
	if got[0].Remaining == 1 && got[1].Remaining == 2 { // callers 1 and 2 the other way round
		got[0].Remaining, got[1].Remaining = 2, 1
	}
	for i, r := range got {
		if want := int64(max(2-i, 0)); r.Allowed != (i < 3) || r.Remaining != want {
			t.Errorf("caller %d: %+v; want allowed %v with %d remaining (callers 1 and 2 in either order)", i+1, r, i < 3, want)
		}
	}
	if calls := scriptCalls(t, srv); calls != 3 {
		t.Errorf("%d script calls, want 3: caller 1, caller 2, and callers 3 to 6 together", calls)
	}
	if inflight, waiting, flying := s.BatchState(); inflight != 0 || waiting != 0 || flying != 0 {
		t.Errorf("after every answer: %d calls and %d decisions in flight, %d waiting; want none", inflight, flying, waiting)
	}
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type answer struct {
	r   redlimit.Result
	err error
}

// goAllow starts AllowN of cost 1 on key and returns where its answer
// will be.
func goAllow(s *redisstore.Store, ctx context.Context, key string, l redlimit.Limit) chan answer {
	ch := make(chan answer, 1)
	go func() {
		r, err := s.AllowN(ctx, key, l, 1)
		ch <- answer{r, err}
	}()
	return ch
}

// receive returns the answer from ch, failing the test after 10 s.
func receive(t *testing.T, what string, ch chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer within 10 s", what)
		return answer{}
	}
}

// TestBatchCancellation shows that a caller who gives up neither loses nor
// doubles another's decision: with the server paused, the calls of
// callers 1 and 1b (on other keys) are in flight and callers 2, 3 and 4
// wait for the next batch. Caller 4 gives up while waiting: its decision
// is never sent. Caller 1 gives up, so the batch of 2 and 3 goes; caller 2
// gives up while it is in flight. When the server resumes, caller 3 gets its answer after
// caller 2's decision, and the key has counted exactly callers 2 and 3.
// (Caller 1's decision may or may not be applied, as for any call
// cancelled in flight.)
func TestBatchCancellation(t *testing.T) {
	// One connection, which the first call opens and puts in rueidis's
	// pipelined mode for good (a call of a cancelable context does), in
	// which a cancellation ends a call at once. rueidis's default of four,
	// each call on one at random, each opened at its first call, would let
	// caller 1's call wait behind a connection's handshake with the paused
	// server, or behind caller 1b's call made synchronously, until
	// rueidis's timeout (5 s).
	srv, s := ownServerStoreWith(t, rueidis.ClientOption{PipelineMultiplex: -1})
	l := redlimit.PerHour(10).FixedWindow()
	warm, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.AllowN(warm, "warm", l, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume() // a second SIGCONT does nothing
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	ctx4, cancel4 := context.WithCancel(context.Background())
	defer cancel1()
	defer cancel2()
	defer cancel4()
	a1 := goAllow(s, ctx1, "other", l)
	waitUntil(t, "caller 1 is in flight", func() bool { n, _, _ := s.BatchState(); return n == 1 })
	a1b := goAllow(s, context.Background(), "other1b", l)
	waitUntil(t, "caller 1b is in flight", func() bool { n, _, _ := s.BatchState(); return n == 2 })
	a2 := goAllow(s, ctx2, "k", l)
	waitUntil(t, "caller 2 waits", func() bool { _, n, _ := s.BatchState(); return n == 1 })
	a3 := goAllow(s, context.Background(), "k", l)
	waitUntil(t, "caller 3 waits", func() bool { _, n, _ := s.BatchState(); return n == 2 })
	a4 := goAllow(s, ctx4, "k", l)
	waitUntil(t, "caller 4 waits", func() bool { _, n, _ := s.BatchState(); return n == 3 })

	cancel4()
	if a := receive(t, "caller 4", a4); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("caller 4, cancelled while waiting: %+v, %v; want context.Canceled", a.r, a.err)
	}
	cancel1()
	if a := receive(t, "caller 1", a1); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("caller 1, cancelled in flight: %+v, %v; want context.Canceled", a.r, a.err)
	}
	waitUntil(t, "the batch of callers 2 and 3 is sent", func() bool { _, n, _ := s.BatchState(); return n == 0 })
	cancel2()
	if a := receive(t, "caller 2", a2); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("caller 2, cancelled in flight: %+v, %v; want context.Canceled", a.r, a.err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if a := receive(t, "caller 1b", a1b); a.err != nil || !a.r.Allowed {
		t.Fatalf("caller 1b: %+v, %v; want allowed", a.r, a.err)
	}
	a := receive(t, "caller 3", a3)
	if a.err != nil || !a.r.Allowed || a.r.Remaining != 8 {
		t.Fatalf("caller 3: %+v, %v; want allowed, 8 remaining (after caller 2)", a.r, a.err)
	}
	r, err := s.Peek(context.Background(), "k", l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != 7 {
		t.Errorf("a peek after callers 2 and 3 (4 gave up before it was sent) finds %d remaining, want 7", r.Remaining)
	}
}

// TestReturnsByContextWhenClientHangs shows that AllowN and Peek return by
// the end of their context even when the client library does not (here it
// ignores the context, and the server is paused): the caller who found
// nothing in flight, and those who queued behind it, get their contexts'
// errors at their deadlines, whether or not the caller's context could
// also be cancelled (resilient's calls have a deadline derived from it).
func TestReturnsByContextWhenClientHangs(t *testing.T) {
	const deadline = 100 * time.Millisecond
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), deadline)
		}},
		{"deadline of a cancelable caller", func() (context.Context, context.CancelFunc) {
			parent, cancelParent := context.WithCancel(context.Background())
			ctx, cancel := context.WithTimeout(parent, deadline)
			return ctx, func() { cancel(); cancelParent() }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, s := ownServerStore(t, redisstore.WithClientDeafToContext())
			if !s.ReturnsByContext() {
				t.Fatal("ReturnsByContext false with batching on")
			}
			l := redlimit.PerHour(10).FixedWindow()
			if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil { // loads the script
				t.Fatal(err)
			}
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			defer srv.Resume()
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			first := goAllow(s, ctx, "first", l)
			waitUntil(t, "the first call is in flight", func() bool { n, _, _ := s.BatchState(); return n == 1 })
			second := goAllow(s, ctx, "second", l)
			waitUntil(t, "the second call is in flight", func() bool { n, _, _ := s.BatchState(); return n == 2 })
			queued := goAllow(s, ctx, "queued", l)
			waitUntil(t, "a caller waits", func() bool { _, n, _ := s.BatchState(); return n == 1 })
			peeked := make(chan answer, 1)
			go func() {
				r, err := s.Peek(ctx, "peeked", l, 1)
				peeked <- answer{r, err}
			}()
			for _, c := range []struct {
				what string
				ch   chan answer
			}{{"the first caller", first}, {"the second caller", second}, {"a queued caller", queued}, {"a queued Peek", peeked}} {
				a := receive(t, c.what, c.ch)
				took := time.Since(start)
				if !errors.Is(a.err, context.DeadlineExceeded) {
					t.Errorf("%s: %+v, %v; want context.DeadlineExceeded", c.what, a.r, a.err)
				}
				// A wide margin for a busy machine: without the bound, the call
				// waits for the server, paused until the test ends.
				if took > deadline+2*time.Second {
					t.Errorf("%s answered after %s with a %s deadline", c.what, took, deadline)
				}
			}
		})
	}
	if _, s2 := ownServerStore(t, redisstore.WithBatching(false)); s2.ReturnsByContext() {
		t.Error("ReturnsByContext true with batching off")
	}
}

// TestDeadlineEndsTheCall shows that the call a kept goroutine makes for a
// lone caller with a deadline ends at it, on a paused server: the
// destination is free again for the next decisions, rather than busy until
// the server answers (and queueing every decision meanwhile).
func TestDeadlineEndsTheCall(t *testing.T) {
	t.Parallel()
	srv, s := ownServerStore(t)
	l := redlimit.PerHour(10).FixedWindow()
	if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	const budgetLeft = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budgetLeft)
	defer cancel()
	start := time.Now()
	if a := receive(t, "the lone caller", goAllow(s, ctx, "lone", l)); !errors.Is(a.err, context.DeadlineExceeded) {
		t.Fatalf("%+v, %v; want context.DeadlineExceeded", a.r, a.err)
	}
	// The same margin as above; the server stays paused throughout.
	waitUntil(t, "the call ends", func() bool { n, _, _ := s.BatchState(); return n == 0 })
	if took := time.Since(start); took > budgetLeft+2*time.Second {
		t.Errorf("the call ended %s after it began, with a budget of %s", took, budgetLeft)
	}
}

// TestBatchErrorReachesOnlyItsCaller shows that when a decision in a batch
// fails on its key, only its caller gets the error: with the server
// paused, caller 1 is in flight, and so is caller 1b's, and callers 2 and
// 3 wait; caller 2's key holds a string, on which the fixed window's
// HGETALL fails, so caller 2 gets ErrKeyState, and caller 3 is decided.
func TestBatchErrorReachesOnlyItsCaller(t *testing.T) {
	srv, s := ownServerStore(t, redisstore.WithPrefix("p:"))
	l := redlimit.PerHour(10).FixedWindow()
	if _, err := srv.Do("SET", s.KeyOf("bad", l), "a string"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllowN(context.Background(), "warm", l, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	a1 := goAllow(s, context.Background(), "good1", l)
	waitUntil(t, "caller 1 is in flight", func() bool { n, _, _ := s.BatchState(); return n == 1 })
	a1b := goAllow(s, context.Background(), "good1b", l)
	waitUntil(t, "caller 1b is in flight", func() bool { n, _, _ := s.BatchState(); return n == 2 })
	a2 := goAllow(s, context.Background(), "bad", l)
	waitUntil(t, "caller 2 waits", func() bool { _, n, _ := s.BatchState(); return n == 1 })
	a3 := goAllow(s, context.Background(), "good3", l)
	waitUntil(t, "caller 3 waits", func() bool { _, n, _ := s.BatchState(); return n == 2 })
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []chan answer{a1, a1b} {
		if a := receive(t, "caller", ch); a.err != nil || !a.r.Allowed {
			t.Errorf("caller %s: %+v, %v; want allowed", []string{"1", "1b"}[i], a.r, a.err)
		}
	}
	if a := receive(t, "caller 2", a2); !errors.Is(a.err, redlimit.ErrKeyState) || !strings.Contains(a.err.Error(), "WRONGTYPE") {
		t.Errorf("caller 2: %+v, %v; want ErrKeyState for WRONGTYPE", a.r, a.err)
	}
	if a := receive(t, "caller 3", a3); a.err != nil || !a.r.Allowed {
		t.Errorf("caller 3: %+v, %v; want allowed", a.r, a.err)
	}
}

// BenchmarkLoneCaller measures one caller's decisions one after another,
// with batching on and off, with a context that cannot end and with one
// that can (an HTTP request's): batching must not delay a caller alone
// (compare ns/op).
func BenchmarkLoneCaller(b *testing.B) {
	for _, mode := range []struct {
		on         bool
		cancelable bool
	}{{true, false}, {true, true}, {false, false}, {false, true}} {
		on := mode.on
		b.Run("batching="+strconv.FormatBool(on)+"/cancelable="+strconv.FormatBool(mode.cancelable), func(b *testing.B) {
			srv := redistest.Start(b)
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := redisstore.New(c, redisstore.WithBatching(on))
			if err != nil {
				b.Fatal(err)
			}
			l := redlimit.PerMinute(1e9).FixedWindow()
			ctx := context.Background()
			if mode.cancelable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			if _, err := s.AllowN(ctx, "k", l, 1); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.AllowN(ctx, "k", l, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKeyAllocs: a decision's Redis key is one allocation, its string (it
// is made for every decision, batched or not).
func TestKeyAllocs(t *testing.T) {
	_, s := ownServerStore(t)
	l := redlimit.PerHour(100).SlidingWindow()
	if n := testing.AllocsPerRun(100, func() { _ = s.KeyOf("user-42", l) }); n > 1 {
		t.Errorf("a key costs %v allocations, want 1", n)
	}
}

// TestBatchCountsSurviveCancellations: callers that give up while waiting
// or in flight, on a server that pauses now and then, leave the batcher's
// counts as they found them: once every call has ended, nothing counts as
// waiting or in flight (a count that drifted would hold second calls back,
// or send them too early, for good).
func TestBatchCountsSurviveCancellations(t *testing.T) {
	t.Parallel()
	srv, s := ownServerStore(t)
	l := redlimit.Per(redlimit.MaxCount, time.Hour).FixedWindow()
	stop := time.Now().Add(600 * time.Millisecond)
	var wg sync.WaitGroup
	var gaveUp atomic.Int64
	for w := range 64 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((w*7+i)%3000)*time.Microsecond)
				if _, err := s.AllowN(ctx, fmt.Sprint("k", (w+i)%8), l, 1); err != nil {
					gaveUp.Add(1)
				}
				cancel()
			}
		})
	}
	for time.Now().Before(stop) {
		time.Sleep(40 * time.Millisecond)
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if gaveUp.Load() == 0 {
		t.Fatal("no caller gave up: nothing was tested")
	}
	t.Logf("%d decisions given up", gaveUp.Load())
	waitUntil(t, "every call ends", func() bool { n, _, _ := s.BatchState(); return n == 0 })
	if inflight, waiting, flying := s.BatchState(); inflight != 0 || waiting != 0 || flying != 0 {
		t.Errorf("%d calls and %d decisions in flight, %d waiting; want none", inflight, flying, waiting)
	}
	if r, err := s.AllowN(context.Background(), "after", l, 1); err != nil || !r.Allowed {
		t.Errorf("a decision after them: %+v, %v", r, err)
	}
}

// TestBatchAnswersNeverCross: callers that give up at random never get
// another caller's answer, on a server that pauses now and then, and on
// Redis Cluster, where batches form per node (see answersNeverCross).
func TestBatchAnswersNeverCross(t *testing.T) {
	t.Parallel()
	t.Run("standalone, pausing", func(t *testing.T) {
		t.Parallel()
		srv, s := ownServerStore(t)
		answersNeverCross(t, s, func() {
			if err := srv.Pause(); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
			if err := srv.Resume(); err != nil {
				t.Error(err)
			}
		})
	})
	for _, goRedis := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster, go-redis %v", goRedis), func(t *testing.T) {
			t.Parallel()
			cl := redistest.SharedCluster(t)
			p := redisstore.WithPrefix(fmt.Sprintf("x%x:", rand.Uint64()))
			answersNeverCross(t, clusterStore(t, cl, goRedis, p), func() {})
		})
	}
}

// answersNeverCross runs 48 workers on s for a second, calling pause every
// 50 ms. Each decides its own key under a count and period of its own,
// alone (private) or beside others on one hot key (whose identical
// decisions merge into entries), with peeks and decisions of two limits
// (its own and a second shared key's) among its allows, under deadlines
// from none to 20 ms: every answer names its caller's limits, and one that
// allows resets after its own period (a sliding log's, from now). The
// remaining is no signature: a decision of two limits on Cluster that gave
// up is refunded in the background, so a private key's remaining may rise.
func answersNeverCross(t *testing.T, s *redisstore.Store, pause func()) {
	stop := time.Now().Add(time.Second)
	hot := redlimit.PerHour(redlimit.MaxLogCount).SlidingLog()
	second := redlimit.PerHour(redlimit.MaxLogCount - 1).SlidingLog()
	var wg sync.WaitGroup
	var answered, gaveUp atomic.Int64
	for w := range 48 {
		wg.Go(func() {
			key, l := fmt.Sprint("own", w), redlimit.Per(int64(50_000+w), time.Hour+time.Duration(w)*time.Second).SlidingLog()
			if w%3 == 0 {
				key, l = "hot", hot
			}
			for i := 0; time.Now().Before(stop); i++ {
				// Some give up waiting, some in flight.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((w*13+i*7)%20_000)*time.Microsecond)
				if i%4 == 0 {
					ctx, cancel = context.WithCancel(context.Background())
				}
				cost := int64(1 + i%3)
				if key == "hot" {
					cost = 1
				}
				var r redlimit.Result
				var err error
				switch i % 7 {
				case 5:
					r, err = s.Peek(ctx, key, l, cost)
				case 6:
					var d redlimit.Decision
					d, err = s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: l, Cost: cost}, {Key: "second", Limit: second, Cost: 1}})
					if err == nil {
						if r2 := d.Results[1]; r2.Max != second.Max() || r2.Remaining < 0 || r2.Remaining > second.Max() || r2.Allowed && r2.ResetAfter != second.Period {
							t.Errorf("worker %d, call %d: second limit %+v: another caller's answer", w, i, r2)
							cancel()
							return
						}
						r = d.Results[0]
					}
				default:
					r, err = s.AllowN(ctx, key, l, cost)
				}
				cancel()
				if err != nil {
					gaveUp.Add(1)
					continue
				}
				answered.Add(1)
				if r.Max != l.Max() || r.Remaining < 0 || r.Remaining > l.Max() || r.Allowed && r.ResetAfter != l.Period {
					t.Errorf("worker %d (%s, %s), call %d: %+v: another caller's answer", w, key, l, i, r)
					return
				}
			}
		})
	}
	for time.Now().Before(stop) {
		time.Sleep(50 * time.Millisecond)
		pause()
	}
	wg.Wait()
	if answered.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("%d answered, %d gave up: want both", answered.Load(), gaveUp.Load())
	}
	t.Logf("%d answered, %d gave up", answered.Load(), gaveUp.Load())
}
