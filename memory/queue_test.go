package memory_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestQueueConcurrent: 64 goroutines queue on one bucket at one instant:
// their places are exactly one emission interval apart, none twice, and
// the delays are what the places say.
func TestQueueConcurrent(t *testing.T) {
	clock := redlimittest.NewClock(redlimittest.T0)
	s, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := redlimit.Per(40, time.Second).TokenBucket(2)
	ei, now := l.EmissionInterval(), redlimittest.T0.UnixMicro()
	var mu sync.Mutex
	var rs []redlimit.Turn
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Queue(context.Background(), "k", l, 1, time.Hour)
			if err != nil || !r.Allowed {
				t.Errorf("Queue: %+v, %v", r, err)
			}
			mu.Lock()
			rs = append(rs, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(rs, func(a, b redlimit.Turn) int { return int(a.TAT - b.TAT) })
	for i, r := range rs {
		wantTAT := now + int64(i+1)*ei
		wantDelay := time.Duration(max(0, int64(i+1)-l.Burst)*ei) * time.Microsecond
		if r.TAT != wantTAT || r.Delay != wantDelay {
			t.Fatalf("place %d: TAT %d, delay %s; want %d, %s", i, r.TAT, r.Delay, wantTAT, wantDelay)
		}
	}
}
