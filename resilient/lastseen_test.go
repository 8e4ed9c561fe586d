package resilient

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestLastSeenMemory measures what an entry of the last-seen map costs. It
// checks the figure in docs/BENCHMARKS.md: about 100 bytes plus the key.
func TestLastSeenMemory(t *testing.T) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%010d", i) // 15 bytes
	}
	lim := redlimit.PerMinute(100)
	res := redlimit.Result{Allowed: true, Max: 100, Remaining: 50, ResetAfter: time.Minute}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ls := newLastSeen(2*n, DefaultCacheBytes, mono{time.Now()}) // room in every shard
	now := time.Now()
	for _, k := range keys {
		ls.put(k, lim, now, res)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := ls.len(); got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per entry besides the key's 15 bytes (which the caller's key string holds)", per)
	if per > 200 {
		t.Errorf("%.0f bytes per entry, docs/BENCHMARKS.md says about 100", per)
	}
	runtime.KeepAlive(ls)
}

// TestDebtsMemory measures what a state owed costs. It checks the figure
// in docs/BENCHMARKS.md: about 200 bytes plus the key.
func TestDebtsMemory(t *testing.T) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%010d", i) // 15 bytes
	}
	lim := redlimit.PerMinute(100).TokenBucket(100)
	var st reconcileStats
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ds := newDebts(2*n, 1<<30, mono{time.Now()}) // room in every shard
	now := time.Now()
	for _, k := range keys {
		ds.add(k, lim, 1, 4, math.MinInt64, now, &st)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := ds.n.Load(); got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per entry besides the key's 15 bytes (which the caller's key string holds)", per)
	if per > 400 {
		t.Errorf("%.0f bytes per entry, docs/BENCHMARKS.md says about 200", per)
	}
	runtime.KeepAlive(ds)
}
