package resilient

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// TestCachesBoundedInBytes: keys are client data, as long as a caller
// accepts (the service takes 64 KiB). A flood of denials and answers for
// long keys keeps each cache within its byte bound, in its own count and
// in the heap, where an entry bound alone would keep 100,000 of them
// (6.5 GB each).
func TestCachesBoundedInBytes(t *testing.T) {
	const bound = 4 << 20
	deny := newDenyCache(DefaultDenyCacheSize, bound)
	seen := newLastSeen(DefaultLastSeenSize, bound, mono{time.Now()})
	l := redlimit.PerMinute(1)
	denial := redlimit.Result{Max: 1, RetryAfter: time.Minute, ResetAfter: time.Minute}
	answer := redlimit.Result{Allowed: true, Max: 1, ResetAfter: time.Minute}
	now := time.Now()
	long := strings.Repeat("k", 64<<10)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 2_000 // 128 MiB of keys
	for i := range n {
		key := long + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		deny.put(key, l, 1, now, denial)
		seen.put(key, l, now, answer)
		if i == 0 {
			if _, ok := deny.get(key, l, 1, now); !ok {
				t.Fatal("a long key's denial was not cached at all")
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for name, b := range map[string]int{"deny cache": deny.bytes(), "last seen": seen.bytes()} {
		if b > bound || b < bound/4 {
			t.Errorf("%s counts %d bytes, want at most %d (and not nearly empty)", name, b, bound)
		}
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 3*bound {
		t.Errorf("the heap grew %d bytes for two caches of %d", grown, bound)
	}
	// An entry larger than a shard's share is not kept.
	huge := strings.Repeat("h", bound)
	deny.put(huge, l, 1, now, denial)
	if _, ok := deny.get(huge, l, 1, now); ok {
		t.Error("a key larger than the bound was cached")
	}
	// forget gives the bytes back.
	last := n - 1
	key := long + string(rune('a'+last%26)) + strings.Repeat("x", last/26)
	b := seen.bytes()
	seen.forget(key, l)
	if got := seen.bytes(); got != b-sizeOf(l.StateID(key)) {
		t.Errorf("forget: %d bytes, want %d", got, b-sizeOf(l.StateID(key)))
	}
}
