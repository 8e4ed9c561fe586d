package dashboard

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// On a skewed (Zipf) stream of denials over 100,000 keys, the heaviest keys
// come out first, in order, with counts that bound their true counts.
func TestTopKeysSkewed(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	rng := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(rng, 1.2, 1, 99_999)
	truth := map[string]uint64{}
	const n = 300_000
	for range n {
		k := "user-" + strconv.FormatUint(zipf.Uint64(), 10)
		truth[k]++
		r.observeAt(t0, Event{Domain: "api", Rule: "api.user", Key: k})
	}
	top := r.Snapshot().TopKeys
	if len(top) != SnapshotTopKeys {
		t.Fatalf("%d top keys, want %d", len(top), SnapshotTopKeys)
	}
	// Key i (from 0) is drawn with probability ∝ 1/(1+i)^1.2: user-0 is
	// the heaviest, then user-1, and so on.
	for i := range 5 {
		if want := "user-" + strconv.Itoa(i); top[i].Key != want {
			t.Errorf("top[%d] = %s (%d), want %s (%d)", i, top[i].Key, top[i].Count, want, truth[want])
		}
	}
	got := map[string]TopKey{}
	for _, k := range top {
		got[k.Key] = k
	}
	for i := range 10 {
		key := "user-" + strconv.Itoa(i)
		k, ok := got[key]
		if !ok {
			t.Errorf("%s (true count %d) missing from the top %d", key, truth[key], SnapshotTopKeys)
			continue
		}
		if tc := truth[key]; k.Count < tc || k.Count-k.Error > tc {
			t.Errorf("%s counted %d (error %d), true %d", key, k.Count, k.Error, tc)
		}
		if k.Domain != "api" || k.Rule != "api.user" {
			t.Errorf("%s under %s/%s, want api/api.user", key, k.Domain, k.Rule)
		}
	}
}

// A million distinct keys leave memory where it was: the summaries hold a
// fixed number of counters.
func TestTopKeysBoundedMemory(t *testing.T) {
	r := NewRecorder(RecorderOptions{})
	limit := 2 * len(r.top.shards) * DefaultTopK
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// Warm up: fill the summaries, so that the measure starts from full.
	for i := range 10 * limit {
		r.Observe(Event{Domain: "api", Rule: "api.ip", Key: "warm-" + strconv.Itoa(i)})
	}
	before := heap()
	const distinct = 1_000_000
	var buf []byte
	for i := range distinct {
		buf = strconv.AppendInt(append(buf[:0], "10.0."...), int64(i), 10)
		r.Observe(Event{Domain: "api", Rule: "api.ip", Key: string(buf)})
	}
	after := heap()
	if n := r.top.size(); n > limit {
		t.Errorf("%d counters after %d distinct keys, want at most %d", n, distinct, limit)
	}
	grew := int64(after) - int64(before)
	t.Logf("heap %d → %d bytes (%+d) after %d distinct keys", before, after, grew, distinct)
	if grew > 256<<10 {
		t.Errorf("heap grew by %d bytes over %d distinct keys, want under 256 KiB", grew, distinct)
	}
	if s := r.Snapshot(); s.Totals.Denied != distinct+uint64(10*limit) || len(s.TopKeys) != SnapshotTopKeys {
		t.Errorf("%d denials, %d top keys", s.Totals.Denied, len(s.TopKeys))
	}
}

// Keys age out: a snapshot covers the current and the previous window.
func TestTopKeysRotation(t *testing.T) {
	c := newClock(t0)
	r := newTestRecorder(c)
	observe(r, at(time.Second), 5, Event{Domain: "d", Rule: "r", Key: "old"})
	c.set(at(30 * time.Second))
	observe(r, c.now(), 1, Event{Domain: "d", Rule: "r", Key: "mid"})

	keys := func() []string {
		var out []string
		for _, k := range r.Snapshot().TopKeys {
			out = append(out, k.Key)
		}
		return out
	}
	equal(t, "at 30 s", keys(), []string{"old", "mid"})
	c.set(at(70 * time.Second)) // a new window: both in the previous one
	observe(r, c.now(), 1, Event{Domain: "d", Rule: "r", Key: "new"})
	equal(t, "at 70 s", keys(), []string{"old", "mid", "new"})
	c.set(at(135 * time.Second)) // again: the first window is gone
	equal(t, "at 135 s", keys(), []string{"new"})
	c.set(at(300 * time.Second)) // two windows without a denial
	if k := keys(); len(k) != 0 {
		t.Errorf("at 300 s: %v, want none", k)
	}
}
