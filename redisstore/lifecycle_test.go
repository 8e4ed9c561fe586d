package redisstore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// lifecycleLimits writes every kind of key, with short periods: long
// enough that a loaded machine (the race detector, load average 20) does
// not see the first keys expire before it has written the last (with 1 s
// periods, one run in three found no key left), short enough that the
// test sees every key expire.
var lifecycleLimits = []redlimit.Limit{
	redlimit.Per(5, 3*time.Second).FixedWindow(),
	redlimit.Per(5, 3*time.Second).SlidingLog(),
	redlimit.Per(5, 3*time.Second).SlidingWindow(),
	redlimit.Per(5, 3*time.Second).TokenBucket(5),
}

// maxTTL is the longest a key of l may live after a write: its window (two
// for the sliding window counter, whose count still weighs in the next one;
// burst intervals for the bucket), plus the millisecond TTLs round up to.
func maxTTL(l redlimit.Limit) time.Duration {
	switch l.Algorithm {
	case redlimit.SlidingWindow:
		return 2*l.Period + time.Millisecond
	case redlimit.TokenBucket:
		return time.Duration(l.Burst*l.EmissionInterval())*time.Microsecond + time.Millisecond
	}
	return l.Period + time.Millisecond
}

func TestKeysCarryTTLsAndExpire(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			s := d.store(t, redisstore.WithPrefix(p))
			ctx := context.Background()
			for _, l := range lifecycleLimits {
				for _, id := range []string{"a", "b{", "c:d"} {
					for range 3 {
						if _, err := s.AllowN(ctx, id, l, 2); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			keys := d.keysWithPrefix(t, p)
			// 3 identifiers x 4 limits; a fixed window's counter expires
			// when its window ends, which a loaded machine may reach
			// between the writes and KEYS.
			fixed := 0
			for _, k := range keys {
				if strings.Contains(k, "}:fw:") {
					fixed++
				}
			}
			if len(keys)-fixed != 9 || fixed > 3 {
				t.Fatalf("%d keys written (%d fixed windows), want 9 and up to 3 fixed windows (3 identifiers x 4 limits): %q", len(keys), fixed, keys)
			}
			for _, k := range keys {
				ttl := time.Duration(atoi(t, d.do(t, k, "PTTL", k))) * time.Millisecond
				if ttl == -2*time.Millisecond {
					// Gone since KEYS listed it: a fixed window's counter
					// expires when its window ends, which may fall between
					// the writes and this read on a slow machine.
					continue
				}
				var l redlimit.Limit
				for _, c := range lifecycleLimits {
					if strings.Contains(k, map[redlimit.Algorithm]string{redlimit.FixedWindow: "}:fw:", redlimit.SlidingLog: "}:sl:", redlimit.SlidingWindow: "}:sw:", redlimit.TokenBucket: "}:tb:"}[c.Algorithm]) {
						l = c
					}
				}
				if ttl <= 0 || ttl > maxTTL(l) {
					t.Errorf("key %q has TTL %s, want in (0, %s]", k, ttl, maxTTL(l))
				}
			}
			// Idle keys vanish on their own: the longest lives 2 periods.
			deadline := time.Now().Add(30 * time.Second)
			for len(d.keysWithPrefix(t, p)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if left := d.keysWithPrefix(t, p); len(left) > 0 {
				t.Errorf("keys still there after idling: %q", left)
			}
		})
	}
}

func TestScriptCacheFlushIsRecovered(t *testing.T) {
	l := redlimit.PerMinute(100).SlidingLog()
	other := redlimit.PerMinute(100).FixedWindow()
	// AllowN and AllowAll run the one decision script: it must be reloaded.
	var shas []string
	for _, src := range []string{redisstore.Script()} {
		sum := sha1.Sum([]byte(src))
		shas = append(shas, hex.EncodeToString(sum[:]))
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			// Not parallel: flushing the script cache under other tests
			// would test them too, but not deterministically.
			s := d.store(t, redisstore.WithPrefix(prefix(t)))
			ctx := context.Background()
			for i := range 3 {
				if _, err := s.AllowN(ctx, "k", l, 1); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: "k", Limit: l, Cost: 1}, {Key: "k", Limit: other, Cost: 1}}); err != nil || !dec.Allowed {
					t.Fatalf("AllowAll %d: %+v, %v", i, dec, err)
				}
				servers := []*redistest.Server{redistest.Shared(t)}
				if d.cluster {
					servers = redistest.SharedCluster(t).Masters()
				}
				for _, srv := range servers {
					if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
						t.Fatal(err)
					}
					for _, sha := range shas {
						if out, _ := srv.Do("SCRIPT", "EXISTS", sha); out != "0" {
							t.Fatalf("script %s still cached after SCRIPT FLUSH: %q", sha, out)
						}
					}
				}
			}
			r, err := s.Peek(ctx, "k", l, 1)
			if err != nil || r.Remaining != 93 {
				t.Fatalf("after 3 flushes: %+v, %v; want 93 remaining", r, err)
			}
		})
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	good := redlimit.PerMinute(10).FixedWindow()
	bad := []struct {
		key   string
		limit redlimit.Limit
		cost  int64
		want  error
	}{
		{"", good, 1, redlimit.ErrInvalidKey},
		{"k", good, 0, redlimit.ErrInvalidCost},
		{"k", redlimit.PerMinute(0), 1, redlimit.ErrInvalidLimit},
		{"k", redlimit.Per(10, 0), 1, redlimit.ErrInvalidLimit},
		{"k", redlimit.Limit{Algorithm: 42, Count: 1, Period: time.Second}, 1, redlimit.ErrUnknownAlgorithm},
		{"k", redlimit.PerSecond(1).TokenBucket(0), 1, redlimit.ErrInvalidBurst},
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			s := d.store(t, redisstore.WithPrefix(p))
			ctx := context.Background()
			for _, b := range bad {
				if _, err := s.AllowN(ctx, b.key, b.limit, b.cost); !errors.Is(err, b.want) {
					t.Errorf("AllowN(%q, %s, %d): %v, want %v", b.key, b.limit, b.cost, err, b.want)
				}
				// The good request in the same call must not be written either.
				reqs := []redlimit.Request{{Key: "good", Limit: good, Cost: 1}, {Key: b.key, Limit: b.limit, Cost: b.cost}}
				if _, err := s.AllowAll(ctx, reqs); !errors.Is(err, b.want) {
					t.Errorf("AllowAll with %q, %s, %d: %v, want %v", b.key, b.limit, b.cost, err, b.want)
				}
			}
			if keys := d.keysWithPrefix(t, p); len(keys) != 0 {
				t.Errorf("bad input wrote %q", keys)
			}
		})
	}
}

// TestOddIdentifiers: identifiers holding braces, colons, newlines or 10 KB
// work on Cluster, keep all of one request's limits in one slot (the script
// declares every key, so Redis would refuse a cross-slot call), stay apart
// from each other, and make short keys.
func TestOddIdentifiers(t *testing.T) {
	d := deployments[2] // rueidis/cluster
	p := prefix(t)
	s := d.store(t, redisstore.WithPrefix(p))
	ctx := context.Background()
	ids := []string{"{", "}", "}{", "{a}", "a", "a{b}c", "{a}:sl:60000000", "a\nb", "%7Ba%7D", "#", strings.Repeat("x", 10<<10), strings.Repeat("x", 10<<10-1) + "y"}
	limits := []redlimit.Limit{
		redlimit.PerHour(1).FixedWindow(),
		redlimit.PerHour(1).SlidingLog(),
		redlimit.PerHour(1).SlidingWindow(),
		redlimit.PerHour(1).TokenBucket(1),
	}
	for _, id := range ids {
		reqs := make([]redlimit.Request, len(limits))
		for i, l := range limits {
			reqs[i] = redlimit.Request{Key: id, Limit: l, Cost: 1}
		}
		dec, err := s.AllowAll(ctx, reqs)
		if err != nil {
			t.Fatalf("%.20q: %v", id, err)
		}
		// Every identifier is new: were two to share keys, the second would
		// find its limits of 1 used up.
		if !dec.Allowed {
			t.Errorf("%.20q was denied: it shares state with an earlier identifier", id)
		}
	}
	if n := d.countKeys(t, p); n != len(ids)*len(limits) {
		t.Errorf("%d keys for %d identifiers x %d limits", n, len(ids), len(limits))
	}
	// The longest key, with a 10 KB identifier, stays short.
	for _, srv := range redistest.SharedCluster(t).Masters() {
		out, err := srv.Do("EVAL", `local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = math.max(n, #k) end return n`, "0", p+"*")
		if err != nil {
			t.Fatal(err)
		}
		if n := atoi(t, out); n > 128 {
			t.Errorf("a key of %d bytes", n)
		}
	}
}

// TestSlidingLogExpiryCoversPeriod checks that a sliding log's write on
// the server's clock leaves the key to expire no earlier than its entry's
// period, plus the margin, from before the call (see log.lua's
// log_append), and not much later: through AllowN's script, a batch and
// AllowAll's.
func TestSlidingLogExpiryCoversPeriod(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			const margin = 250 * time.Millisecond
			p := prefix(t)
			s := d.store(t, redisstore.WithPrefix(p), redisstore.WithTTLMargin(margin))
			ctx := context.Background()
			l := redlimit.Per(100, 7*time.Second).SlidingLog()
			ways := map[string]func(id string) error{
				"AllowN": func(id string) error { _, err := s.AllowN(ctx, id, l, 1); return err },
				"batch": func(id string) error {
					_, err := s.DecideBatch(ctx, []redlimit.Request{{Key: id, Limit: l, Cost: 1}, {Key: id + "x", Limit: l, Cost: 1}}, nil)
					return err
				},
				"AllowAll": func(id string) error {
					_, err := s.AllowAll(ctx, []redlimit.Request{{Key: id, Limit: l, Cost: 1}, {Key: id, Limit: redlimit.PerMinute(5).FixedWindow(), Cost: 1}})
					return err
				},
			}
			for name, allow := range ways {
				for i := range 3 {
					before := time.Now()
					if err := allow(name); err != nil {
						t.Fatal(err)
					}
					after := time.Now()
					var key string
					for _, k := range d.keysWithPrefix(t, p) {
						if strings.Contains(k, "{"+name+"}:sl:") {
							key = k
						}
					}
					if key == "" {
						t.Fatalf("%s: no sliding log key among %q", name, d.keysWithPrefix(t, p))
					}
					at := time.UnixMilli(atoi(t, d.do(t, key, "PEXPIRETIME", key)))
					lo, hi := before.Add(l.Period+margin).Truncate(time.Millisecond), after.Add(l.Period+margin+time.Millisecond)
					if at.Before(lo) || at.After(hi) {
						t.Errorf("%s, write %d: key expires at %s, want in [%s, %s]", name, i, at.Format(time.StampMicro), lo.Format(time.StampMicro), hi.Format(time.StampMicro))
					}
				}
			}
		})
	}
}
