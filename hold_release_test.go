package redlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// TestHoldReleaseDuringFailingRenewal: release returns at once while a
// renewal keeps failing and retrying. It does not wait for the retries
// to give up, which takes up to a third of the TTL.
func TestHoldReleaseDuringFailingRenewal(t *testing.T) {
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	c := redlimit.InFlight(1, 6*time.Second) // renewed every 2 s, retried until 4 s
	l, release, err := redlimit.Hold(context.Background(), s, "job", c)
	if err != nil || !l.Held {
		t.Fatalf("Hold: %+v, %v", l, err)
	}
	s.Close() // every call now fails at once
	time.Sleep(c.TTL/3 + 300*time.Millisecond)
	start := time.Now()
	release()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("release took %v while the renewal retried; want it at once", d)
	}
}
