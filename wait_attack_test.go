package redlimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// oddRetry is a Limiter whose denials say to retry after retry (0 or
// negative), as a third-party Limiter with a bug might; it counts calls.
type oddRetry struct {
	redlimit.Limiter
	retry time.Duration
	calls atomic.Int64
}

func (o *oddRetry) AllowN(ctx context.Context, key string, l redlimit.Limit, n int64) (redlimit.Result, error) {
	o.calls.Add(1)
	res, err := o.Limiter.AllowN(ctx, key, l, n)
	if !res.Allowed {
		res.RetryAfter = o.retry
	}
	return res, err
}

// TestWaitOddRetryAfter: a Limiter whose denials retry after 0 or a
// negative duration neither panics Wait nor makes it spin: it retries at
// most about once a millisecond until its wait ends.
func TestWaitOddRetryAfter(t *testing.T) {
	for _, retry := range []time.Duration{0, -time.Second} {
		store, err := memory.New()
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		lim := &oddRetry{Limiter: store, retry: retry}
		l := redlimit.Per(1, time.Hour).FixedWindow()
		if res, err := redlimit.Wait(context.Background(), lim, "k", l, 1, time.Second); err != nil || !res.Allowed {
			t.Fatalf("first: %+v, %v", res, err)
		}
		const wait = 50 * time.Millisecond
		res, err := redlimit.Wait(context.Background(), lim, "k", l, 1, wait)
		if err != nil || res.Allowed {
			t.Fatalf("retry %v: %+v, %v; want a denial", retry, res, err)
		}
		if n := lim.calls.Load(); n > 2+int64(wait/time.Millisecond) {
			t.Errorf("retry %v: %d calls in %v", retry, n, wait)
		}
	}
}
