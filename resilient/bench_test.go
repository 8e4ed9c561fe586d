package resilient_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/resilient"
)

// BenchmarkAsk measures a decision on Redis through the Limiter, for a
// caller without a deadline, for one whose context can be cancelled but
// has no deadline (a gRPC request without grpc-timeout: a new cancelable
// context each call, whose own cost is in the figures), and for one with
// a 20 ms deadline (as Envoy sends).
func BenchmarkAsk(b *testing.B) {
	for _, c := range []struct {
		name       string
		deadline   time.Duration
		cancelable bool
	}{{"no-deadline", 0, false}, {"no-deadline-cancelable", 0, true}, {"caller-20ms", 20 * time.Millisecond, false}} {
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter(b, redisStore(b, []string{redistest.Shared(b).Addr()}), resilient.Options{})
			lim := redlimit.PerHour(redlimit.MaxCount)
			ctx := context.Background()
			if c.deadline > 0 {
				// One context for the run: its own allocations are not
				// the Limiter's.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
				ctx = shortDeadline{ctx, c.deadline}
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := ctx, context.CancelFunc(func() {})
					if c.cancelable {
						ctx, cancel = context.WithCancel(ctx)
					}
					_, err := l.Allow(ctx, "k", lim)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// shortDeadline is ctx with a deadline d from whenever it is asked.
type shortDeadline struct {
	context.Context
	d time.Duration
}

func (s shortDeadline) Deadline() (time.Time, bool) { return time.Now().Add(s.d), true }

// The Limiter's own allocations on a store call that answers, for a caller
// without a deadline, stay at maxWrapperAllocs over the store's; and a
// caller whose context can be cancelled but has no deadline (a gRPC
// request without grpc-timeout) costs at most maxCancelableAllocs more
// (the call's context is registered with it). Not parallel: allocations
// are counted process-wide, so each figure is the least of three runs
// (the client library's goroutines allocate too).
func TestAskAllocs(t *testing.T) {
	store := redisStore(t, []string{redistest.Shared(t).Addr()})
	l := newLimiter(t, store, resilient.Options{Timeout: 5 * time.Second})
	lim := redlimit.PerHour(redlimit.MaxCount)
	allow := func(ctx context.Context) {
		if _, err := l.Allow(ctx, "TestAskAllocs", lim); err != nil {
			t.Fatal(err)
		}
	}
	least := func(f func()) float64 {
		n := testing.AllocsPerRun(100, f)
		for range 2 {
			n = min(n, testing.AllocsPerRun(100, f))
		}
		return n
	}
	for range 10 {
		allow(context.Background()) // the first calls set up what later ones reuse
	}
	plain := least(func() { allow(context.Background()) })
	direct := least(func() {
		if _, err := store.AllowN(context.Background(), "TestAskAllocs", lim, 1); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("AllowN: %v allocations through the Limiter, %v on the store alone", plain, direct)
	if direct > maxStoreAllocs+allocNoise {
		t.Errorf("redisstore's AllowN alone: %v allocations, want at most %d", direct, maxStoreAllocs)
	}
	if wrapper := plain - direct; wrapper > maxWrapperAllocs+allocNoise {
		t.Errorf("the Limiter adds %.1f allocations to its store's AllowN (%v against %v), want at most %d", wrapper, plain, direct, maxWrapperAllocs)
	}
	ownAllocs := least(func() {
		ctx, cancel := context.WithCancel(context.Background())
		_ = ctx.Done() // the Limiter asks for it: its channel is made then
		cancel()
	})
	cancelable := least(func() {
		ctx, cancel := context.WithCancel(context.Background())
		allow(ctx)
		cancel()
	})
	if extra := cancelable - ownAllocs - plain; extra > maxCancelableAllocs+allocNoise {
		t.Errorf("a cancelable caller's call: %.1f allocations more than a plain one's (%v against %v; its context: %v); want at most %d", extra, cancelable, plain, ownAllocs, maxCancelableAllocs)
	}
}

// maxStoreAllocs is what redisstore's AllowN allocates on rueidis, for a
// caller without a deadline (measured): the batch entry's key, the
// script's keys and arguments, and rueidis's command and reply.
const maxStoreAllocs = 10

// maxWrapperAllocs is what the Limiter allocates on an AllowN the store
// answers, for a caller without a deadline (measured): the call's context
// with its deadline, AllowN's slices, the breaker's done function, and the
// store's hand-off of a call with a deadline to a kept goroutine.
const maxWrapperAllocs = 9

// maxCancelableAllocs is what a cancelable caller's call costs beyond a
// plain one's (measured): the call's context registered with the caller's.
const maxCancelableAllocs = 2

// allocNoise is how far two allocation counts of the same path may differ
// by chance. Under the race detector sync.Pool drops a quarter of what is
// put back, at random, so the client library's pooled command buffers are
// made again on some calls and not others: the figures of one path moved
// by 1 from one run to the next (20 or 21 through the Limiter, 10 or 11
// on the store alone), and a strict comparison failed one run in five.
var allocNoise = 0.5 + float64(raceAllocNoise)
