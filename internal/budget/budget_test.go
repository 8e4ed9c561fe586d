package budget

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBeforeIsWithinAQuantum(t *testing.T) {
	const q = 4 * time.Millisecond
	c := NewClock(q)
	now := time.Now()
	for _, at := range []time.Time{now.Add(-time.Second), now, now.Add(time.Microsecond), now.Add(30 * time.Millisecond), now.Add(time.Hour), time.Unix(-5, 123)} {
		e := c.Before(at)
		if e.At.After(at) || !e.At.After(at.Add(-q)) {
			t.Errorf("Before(%s) = %s, want in (%s, %s]", at, e.At, at.Add(-q), at)
		}
	}
}

// An End keeps the monotonic reading of the time it was made for, so that
// a step of the wall clock moves neither its timer nor the deadlines set
// from it.
func TestEndIsMonotonic(t *testing.T) {
	e := NewClock(time.Millisecond).Before(time.Now().Add(time.Second))
	if !strings.Contains(e.At.String(), " m=") {
		t.Errorf("End.At %s has no monotonic reading", e.At)
	}
}

func TestCallsOfAQuantumShareAnEnd(t *testing.T) {
	const q = time.Hour // every call below falls in one or two quanta
	c := NewClock(q)
	at := time.Now().Add(2 * q)
	ends := make(map[*End]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			e := c.Before(at)
			mu.Lock()
			ends[e] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	// Racing calls may each make one before one of them is shared; later
	// calls all get the shared one.
	shared := c.Before(at)
	for range 10 {
		if e := c.Before(at); e != shared {
			t.Fatalf("two Ends for one quantum after the first calls: %p and %p", e, shared)
		}
	}
	if !ends[shared] {
		t.Errorf("the shared End is none of those the first calls got")
	}
}

func TestDoneClosesAtItsEnd(t *testing.T) {
	c := NewClock(time.Millisecond)
	at := time.Now().Add(30 * time.Millisecond)
	e := c.Before(at)
	select {
	case <-e.Done:
		t.Fatalf("Done closed %s before its end", time.Until(e.At))
	default:
	}
	select {
	case <-e.Done:
		if early := time.Until(e.At); early > 0 {
			t.Errorf("Done closed %s before its end", early)
		}
	// A margin for a busy 2-core machine running -race.
	case <-time.After(time.Until(e.At) + 2*time.Second):
		t.Fatal("Done not closed 2 s after its end")
	}
	if past := c.Before(time.Now().Add(-time.Second)); past.At.After(time.Now()) {
		t.Errorf("an End in the past: %s", past.At)
	} else {
		<-past.Done // closed at once; the test times out otherwise
	}
}

func TestWithAndOf(t *testing.T) {
	ctx := context.Background()
	if Of(ctx) != nil {
		t.Fatal("an End in a context without one")
	}
	e := NewClock(time.Millisecond).Before(time.Now().Add(time.Second))
	type other struct{}
	got := Of(context.WithValue(With(ctx, e), other{}, 1))
	if got != e {
		t.Errorf("Of = %p, want %p", got, e)
	}
}
