package redisstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestDocumentedACL runs every path of the scripts as the ACL user that
// docs/SECURITY.md tells operators to create, on a server of its own: the
// conformance suite (on the store's clock), then on the server's clock
// (TIME) every algorithm alone, in batches and in runs on one key, several
// limits with a debit, a denial's search, Admit and Refund, DebitOnce,
// Reset, the node registry, and a call after SCRIPT FLUSH. Every call must
// succeed and the server's ACL LOG stay empty: a command a script starts
// to call is refused to a deployment on the documented user (NOPERM, every
// such decision answered by the failure policy) until the doc names it.
func TestDocumentedACL(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "user redlimit "); ok {
			rules = strings.Fields(rest)
		}
	}
	if len(rules) == 0 {
		t.Fatal(`docs/SECURITY.md has no line "user redlimit ..."`)
	}
	const password = "acl-test-password"
	for i, r := range rules {
		if strings.HasPrefix(r, ">") {
			rules[i] = ">" + password
		}
	}
	srv := redistest.Start(t)
	if out, err := srv.Do(append([]string{"ACL", "SETUSER", "redlimit"}, rules...)...); err != nil {
		t.Fatalf("ACL SETUSER redlimit %s: %s, %v", strings.Join(rules, " "), out, err)
	}
	url := "redis://redlimit:" + password + "@" + srv.Addr()
	ctx := context.Background()
	open := func(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
		t.Helper()
		s, err := redisstore.Open(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s as the documented ACL user: %v", what, err)
		}
	}

	t.Run("conformance", func(t *testing.T) {
		redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
			return open(t, redisstore.WithClock(now), redisstore.WithTTLMargin(time.Minute))
		})
	})

	t.Run("server clock", func(t *testing.T) {
		s := open(t)
		limits := []redlimit.Limit{
			redlimit.Per(3, time.Hour).FixedWindow(),
			redlimit.Per(3, time.Hour).SlidingWindow(),
			redlimit.Per(3, time.Hour).TokenBucket(3),
			redlimit.Per(3, time.Hour).SlidingLog(),
		}
		for _, l := range limits {
			// Alone, then past the limit: a denial (a sliding log's
			// search for its retry-after), then in debt.
			for range 4 {
				_, err := s.AllowN(ctx, "alone", l, 1)
				check("AllowN "+l.String(), err)
			}
			_, err := s.AllowN(ctx, "alone", l, 2)
			check("AllowN 2 "+l.String(), err)
			_, err = s.Peek(ctx, "alone", l, 1)
			check("Peek "+l.String(), err)
			_, err = s.AllowAll(ctx, []redlimit.Request{{Key: "debt", Limit: l, Cost: redlimit.MaxCost, Debit: true}})
			check("a debit of MaxCost "+l.String(), err)
			_, err = s.AllowN(ctx, "debt", l, 2)
			check("AllowN in debt "+l.String(), err)
			// Concurrent decisions: batches, and runs on one key.
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					_, err := s.AllowN(ctx, []string{"hot", "a", "b", "c"}[i%4], l, 1)
					check("a batched AllowN "+l.String(), err)
				})
			}
			wg.Wait()
			g, err := s.Admit(ctx, []redlimit.Request{{Key: "admit", Limit: l, Cost: 2}, {Key: "admit", Limit: redlimit.Per(7, time.Minute).TokenBucket(7), Cost: 1}})
			check("Admit "+l.String(), err)
			if err == nil {
				check("Refund "+l.String(), s.Refund(ctx, g, []int64{1, 1}))
			}
			_, _, err = s.DebitOnce(ctx, redlimit.Request{Key: "once", Limit: l, Cost: 1, Debit: true}, "id-1")
			check("DebitOnce "+l.String(), err)
			_, _, err = s.DebitOnce(ctx, redlimit.Request{Key: "once", Limit: l, Cost: 1, Debit: true}, "id-1")
			check("DebitOnce again "+l.String(), err)
			check("Reset "+l.String(), s.Reset(ctx, "alone", l))
		}
		// A sliding log long enough to be trimmed.
		log := redlimit.Per(redlimit.MaxLogCount, 50*time.Millisecond).SlidingLog()
		for range 40 {
			_, err := s.AllowN(ctx, "trimmed", log, 3)
			check("AllowN on a log being trimmed", err)
			time.Sleep(5 * time.Millisecond)
		}
		// A refund of its newest entry after entries expired at its time
		// (refund.lua's expire_before).
		for range 3 {
			_, err := s.AllowN(ctx, "expired", log, 1)
			check("AllowN on a log whose entries expire", err)
			time.Sleep(30 * time.Millisecond)
		}
		g, err := s.Admit(ctx, []redlimit.Request{{Key: "expired", Limit: log, Cost: 1}})
		check("Admit on a log whose entries expired", err)
		if err == nil {
			check("Refund of the newest entry", s.Refund(ctx, g, []int64{1}))
		}
		reg, err := s.Register(ctx, redisstore.RegistryOptions{Interval: 50 * time.Millisecond})
		check("Register", err)
		if err == nil {
			time.Sleep(150 * time.Millisecond) // a few heartbeats
			if n := reg.Nodes(); n != 1 {
				t.Errorf("the registry counts %d nodes, want 1", n)
			}
			check("Registry.Close", reg.Close())
		}
		// The scripts loaded again after a flush (EVAL, then EVALSHA).
		if out, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatalf("SCRIPT FLUSH: %s, %v", out, err)
		}
		for _, l := range limits {
			_, err := s.AllowN(ctx, "after-flush", l, 1)
			check("AllowN after SCRIPT FLUSH "+l.String(), err)
		}
	})

	if out, err := srv.Do("ACL", "LOG"); err != nil || out != "" {
		t.Errorf("ACL LOG: %q, %v; want it empty", out, err)
	}
}
