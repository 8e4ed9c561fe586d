package redlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
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
	c := redlimit.InFlight(1, 60*time.Millisecond)
	l, release, err := redlimit.Hold(ctx, s, "job", c)
	if err != nil || !l.Held {
		t.Fatalf("Hold: %+v, %v", l, err)
	}
	cancel() // the request's end does not stop the renewals
	for range 5 {
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
