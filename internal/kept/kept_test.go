package kept_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/kept"
)

// TestPoolRunsAndEnds: every value given runs, also many at once (more
// than the goroutines kept); once closed and idle, the Pool leaves no
// goroutine behind.
func TestPoolRunsAndEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	p := kept.New(2, func(v int) {
		defer wg.Done()
		time.Sleep(time.Millisecond)
		mu.Lock()
		seen[v] = true
		mu.Unlock()
	})
	const n = 50
	wg.Add(n)
	for i := range n {
		p.Go(i)
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d values run of %d", len(seen), n)
	}
	p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after Close", before, runtime.NumGoroutine())
		}
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	p.Go(n) // after Close: still run, on a goroutine of its own
	wg.Wait()
	if !seen[n] {
		t.Error("a value given after Close did not run")
	}
}
