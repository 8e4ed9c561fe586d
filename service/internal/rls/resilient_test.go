package rls

import (
	"context"
	"errors"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/resilient"
)

// down is a store that always fails.
type down struct{}

var errDown = errors.New("store down")

func (down) AllowN(context.Context, string, redlimit.Limit, int64) (redlimit.Result, error) {
	return redlimit.Result{}, errDown
}
func (down) AllowAll(context.Context, []redlimit.Request) (redlimit.Decision, error) {
	return redlimit.Decision{}, errDown
}
func (down) Peek(context.Context, string, redlimit.Limit, int64) (redlimit.Result, error) {
	return redlimit.Result{}, errDown
}
func (down) Reset(context.Context, string, redlimit.Limit) error { return errDown }

// The failure policies of the rules answer while the store is down, and
// every descriptor says which path decided it.
func TestFailurePolicies(t *testing.T) {
	t.Parallel()
	rl, err := resilient.New(down{}, resilient.Options{DenyCache: resilient.DenyCacheOptions{Size: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	d := domain("f",
		node("open", "", rule("f.open", "", redlimit.PerMinute(1).OnFailure(redlimit.FailOpen), "minute")),
		node("closed", "", rule("f.closed", "", redlimit.PerMinute(1).OnFailure(redlimit.FailClosed), "minute")),
		node("local", "", rule("f.local", "", redlimit.PerMinute(1), "minute")),
	)
	f := newFixture(t, Options{Limiter: rl}, d)
	for i := range 3 {
		if resp := f.do(request("f", desc("open", "x"))); sig(resp) != "O:O" {
			t.Fatalf("fail_open %d: %s", i, sig(resp))
		}
	}
	if resp := f.do(request("f", desc("closed", "x"))); sig(resp) != "X:X" {
		t.Fatalf("fail_closed: %s", sig(resp))
	}
	if resp := f.do(request("f", desc("local", "x"))); sig(resp) != "O:O" {
		t.Fatalf("local 1: %s", sig(resp))
	}
	if resp := f.do(request("f", desc("local", "x"))); sig(resp) != "X:X" {
		t.Fatalf("local 2 (this node's share is 1): %s", sig(resp))
	}
	for key, want := range map[string]int{
		"f f.open allowed fail_open":    3,
		"f f.closed denied fail_closed": 1,
		"f f.local allowed local":       1,
		"f f.local denied local":        1,
	} {
		if n := f.obs.count(key); n != want {
			t.Errorf("%q observed %d times, want %d", key, n, want)
		}
	}
	if f.obs.sources[redlimit.FromStore] != 0 || f.obs.sources[redlimit.FromFailOpen] != 3 || f.obs.errs != 0 {
		t.Errorf("backend calls by source %v, errors %d", f.obs.sources, f.obs.errs)
	}
}

func TestDenyCacheSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{}, domain("c", node("k", "", rule("c.k", "", redlimit.PerMinute(1).SlidingLog(), "minute"))))
	rl, err := resilient.New(f.store, resilient.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	g := newFixture(t, Options{Limiter: rl}, domain("c", node("k", "", rule("c.k", "", redlimit.PerMinute(1).SlidingLog(), "minute"))))
	g.clock = f.clock
	for range 4 {
		g.do(request("c", desc("k", "v")))
	}
	for key, want := range map[string]int{
		"c c.k allowed store":     1,
		"c c.k denied store":      1,
		"c c.k denied deny_cache": 2,
	} {
		if n := g.obs.count(key); n != want {
			t.Errorf("%q observed %d times, want %d", key, n, want)
		}
	}
}
