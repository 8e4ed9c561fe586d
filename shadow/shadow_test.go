package shadow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/shadow"
)

// counting counts the AllowAll calls made of a store.
type counting struct {
	*memory.Store
	calls int
}

func (c *counting) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	c.calls++
	return c.Store.AllowAll(ctx, reqs)
}

func newStore(t *testing.T) *counting {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &counting{Store: s}
}

// rolesOf returns the roles of limits in shadow mode where inShadow says,
// enforced elsewhere.
func rolesOf(inShadow []bool) []shadow.Role {
	roles := make([]shadow.Role, len(inShadow))
	for i, s := range inShadow {
		if s {
			roles[i] = shadow.Shadow
		}
	}
	return roles
}

// used returns how much of l key has consumed.
func used(t *testing.T, s *counting, key string, l redlimit.Limit) int64 {
	t.Helper()
	res, err := s.Peek(context.Background(), key, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	left := res.Remaining
	if res.Allowed {
		left++ // Peek answers as if the request of cost 1 were made
	}
	return l.Max() - left
}

// TestEachShadowLimitAlone checks the meaning: each shadow limit counts the
// requests as if it alone were added to the enforced ones, and the enforced
// ones as if there were no shadow limit.
func TestEachShadowLimitAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	enforced, tight, loose := redlimit.PerMinute(100), redlimit.PerMinute(1), redlimit.PerMinute(5)
	reqs := []redlimit.Request{{Key: "e", Limit: enforced, Cost: 1}, {Key: "t", Limit: tight, Cost: 1}, {Key: "l", Limit: loose, Cost: 1}}
	inShadow := []bool{false, true, true}
	for i := range 7 {
		calls := s.calls
		d, err := shadow.Decide(ctx, s, reqs, rolesOf(inShadow))
		if err != nil || !d.Allowed || d.RetryAfter != 0 {
			t.Fatalf("request %d: %+v, %v; want allowed", i, d, err)
		}
		if got := d.Results[1].Allowed; got != (i == 0) {
			t.Errorf("request %d: the tight shadow limit allowed %v", i, got)
		}
		if got := d.Results[2].Allowed; got != (i < 5) {
			t.Errorf("request %d: the loose shadow limit allowed %v", i, got)
		}
		// One call while every limit allows; two once a shadow limit denies.
		if want := 1 + min(i, 1); s.calls-calls != want {
			t.Errorf("request %d: %d calls, want %d", i, s.calls-calls, want)
		}
	}
	// The loose limit counted 5 of 7, although the tight one would have
	// denied 6: it counts as if it alone were enforced.
	for _, c := range []struct {
		key   string
		limit redlimit.Limit
		want  int64
	}{{"e", enforced, 7}, {"t", tight, 1}, {"l", loose, 5}} {
		if got := used(t, s, c.key, c.limit); got != c.want {
			t.Errorf("%s: %d used, want %d", c.key, got, c.want)
		}
	}
}

// TestEnforcedDenial checks that a request an enforced limit denies consumes
// nothing, shadow limits included, that the shadow limits still answer, and
// that RetryAfter is the enforced limits' alone.
func TestEnforcedDenial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	enforced, shadowed := redlimit.PerMinute(1).SlidingLog(), redlimit.PerHour(1).SlidingLog()
	reqs := []redlimit.Request{{Key: "s", Limit: shadowed, Cost: 1}, {Key: "e", Limit: enforced, Cost: 1}}
	inShadow := []bool{true, false}
	if d, err := shadow.Decide(ctx, s, reqs, rolesOf(inShadow)); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	calls := s.calls
	d, err := shadow.Decide(ctx, s, reqs, rolesOf(inShadow))
	if err != nil || d.Allowed || d.RetryAfter != time.Minute || s.calls-calls != 1 {
		t.Fatalf("second: %+v, %v, %d calls; want denied, retry after 1m (not the shadow limit's 1h), one call", d, err, s.calls-calls)
	}
	if d.Results[0].Allowed || d.Results[0].RetryAfter != time.Hour {
		t.Errorf("the shadow limit's answer: %+v, want its own denial", d.Results[0])
	}
	if got := used(t, s, "s", shadowed); got != 1 {
		t.Errorf("shadow limit: %d used, want 1", got)
	}
}

// TestOnlyShadow checks requests whose limits are all in shadow mode: always
// allowed, each limit counting on its own.
func TestOnlyShadow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	a, b := redlimit.PerMinute(1).SlidingLog(), redlimit.PerMinute(3).SlidingLog()
	reqs := []redlimit.Request{{Key: "a", Limit: a, Cost: 1}, {Key: "b", Limit: b, Cost: 1}}
	for i := range 4 {
		if d, err := shadow.Decide(ctx, s, reqs, rolesOf([]bool{true, true})); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	if got := used(t, s, "b", b); got != 3 {
		t.Errorf("b: %d used, want 3", got)
	}
	// With no shadow limit, Decide is AllowAll.
	d, err := shadow.Decide(ctx, s, reqs[:1], nil)
	if err != nil || d.Allowed || d.RetryAfter != time.Minute {
		t.Errorf("enforced only: %+v, %v; want a denial", d, err)
	}
}

// TestDebitsCountedOnce checks debits beside shadow limits: the first call
// counts the debit whatever the others say, and the calls after it, which
// ask the others again without the shadow limits that denied, leave it out.
func TestDebitsCountedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	budget, shadowed, enforced := redlimit.PerMinute(1000).SlidingLog(), redlimit.PerMinute(1).SlidingLog(), redlimit.PerMinute(10).SlidingLog()
	reqs := []redlimit.Request{
		{Key: "b", Limit: budget, Cost: 300, Debit: true},
		{Key: "s", Limit: shadowed, Cost: 1},
		{Key: "e", Limit: enforced, Cost: 1},
	}
	roles := []shadow.Role{shadow.Enforced, shadow.Shadow, shadow.Enforced}
	for i := range 3 {
		calls := s.calls
		d, err := shadow.Decide(ctx, s, reqs, roles)
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want allowed", i, d, err)
		}
		if want := 1 + min(i, 1); s.calls-calls != want {
			t.Errorf("request %d: %d calls, want %d", i, s.calls-calls, want)
		}
	}
	for _, c := range []struct {
		key   string
		limit redlimit.Limit
		want  int64
	}{{"b", budget, 900}, {"s", shadowed, 1}, {"e", enforced, 3}} {
		if got := used(t, s, c.key, c.limit); got != c.want {
			t.Errorf("%s: %d used, want %d", c.key, got, c.want)
		}
	}
	// A debit that does not fit denies as an enforced limit does: the
	// request is denied, its admissions consume nothing, the debit counts.
	reqs[0].Cost = 500
	d, err := shadow.Decide(ctx, s, reqs, roles)
	if err != nil || d.Allowed || d.Results[0].Allowed {
		t.Fatalf("a debit over the budget: %+v, %v; want denied", d, err)
	}
	if got := used(t, s, "e", enforced); got != 3 {
		t.Errorf("the admission beside the denied debit: %d used, want 3", got)
	}
	if got := used(t, s, "b", budget); got != 1000 {
		t.Errorf("the budget after a debit into debt: %d used as Peek sees it, want all 1000", got)
	}
}

// scripted answers AllowAll with the decisions given, in turn.
type scripted struct {
	answers []redlimit.Decision
	asked   [][]redlimit.Request
	err     error
}

func (s *scripted) AllowAll(_ context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	s.asked = append(s.asked, reqs)
	if s.err != nil {
		return redlimit.Decision{}, s.err
	}
	d := s.answers[0]
	s.answers = s.answers[1:]
	return d, nil
}

// TestUndecidedAndBadReplies checks an enforced limit left undecided by a
// shadow denial (a store deciding in parts), and the limiter's errors.
func TestUndecidedAndBadReplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reqs := []redlimit.Request{{Key: "e"}, {Key: "s"}}
	inShadow := []bool{false, true}
	ok := redlimit.Result{Allowed: true, Max: 5, Remaining: 4}
	no := redlimit.Result{Max: 5, RetryAfter: time.Second}
	undecided := redlimit.Result{Source: redlimit.Undecided}

	lim := &scripted{answers: []redlimit.Decision{{Results: []redlimit.Result{undecided, no}}, {Allowed: true, Results: []redlimit.Result{ok}}}}
	d, err := shadow.Decide(ctx, lim, reqs, rolesOf(inShadow))
	if err != nil || !d.Allowed || d.Results[0] != ok || d.Results[1] != no {
		t.Errorf("undecided enforced limit: %+v, %v; want it decided again, allowed", d, err)
	}
	if len(lim.asked) != 2 || len(lim.asked[1]) != 1 || lim.asked[1][0].Key != "e" {
		t.Errorf("asked %v, want all, then e alone", lim.asked)
	}

	for name, lim := range map[string]*scripted{
		"too few results": {answers: []redlimit.Decision{{Allowed: true, Results: []redlimit.Result{ok}}}},
		"nobody denied":   {answers: []redlimit.Decision{{Results: []redlimit.Result{undecided, undecided}}}},
	} {
		if _, err := shadow.Decide(ctx, lim, reqs, rolesOf(inShadow)); !errors.Is(err, redlimit.ErrBadReply) {
			t.Errorf("%s: %v, want ErrBadReply", name, err)
		}
	}
	boom := errors.New("boom")
	if _, err := shadow.Decide(ctx, &scripted{}, reqs, rolesOf(inShadow[:1])); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("a role short: %v, want ErrInvalidLimit", err)
	}
	if _, err := shadow.Decide(ctx, &scripted{err: boom}, reqs, rolesOf(inShadow)); !errors.Is(err, boom) {
		t.Errorf("limiter error: %v, want boom", err)
	}
}

// TestQuotas checks quota limits: each counts as if it alone were added to
// the enforced limits, and the request is denied, consuming nothing, only
// when every quota denies, with the shortest RetryAfter of the quotas.
func TestQuotas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	enforced, east, west := redlimit.PerMinute(100), redlimit.PerMinute(1), redlimit.PerHour(2)
	reqs := []redlimit.Request{{Key: "e", Limit: enforced, Cost: 1}, {Key: "east", Limit: east, Cost: 1}, {Key: "west", Limit: west, Cost: 1}}
	roles := []shadow.Role{shadow.Enforced, shadow.Quota, shadow.Quota}
	for i, want := range []struct {
		allowed    bool
		east, west bool
		calls      int
	}{
		{true, true, true, 1},    // both have room: one call consumes all
		{true, false, true, 2},   // east spent: west (and e) consume
		{false, false, false, 1}, // both spent: denied, nothing consumed
		{false, false, false, 1},
	} {
		calls := s.calls
		d, err := shadow.Decide(ctx, s, reqs, roles)
		if err != nil || d.Allowed != want.allowed || d.QuotaDenied == want.allowed || d.Results[1].Allowed != want.east || d.Results[2].Allowed != want.west || s.calls-calls != want.calls {
			t.Fatalf("request %d: %+v, %v, %d calls; want allowed %v, east %v, west %v, %d calls",
				i, d, err, s.calls-calls, want.allowed, want.east, want.west, want.calls)
		}
		if east, west := d.Results[1].RetryAfter, d.Results[2].RetryAfter; !want.allowed && (d.RetryAfter != east || east >= west) {
			t.Errorf("request %d: retry after %s, want east's %s, before west's %s", i, d.RetryAfter, east, west)
		}
	}
	for _, c := range []struct {
		key   string
		limit redlimit.Limit
		want  int64
	}{{"e", enforced, 2}, {"east", east, 1}, {"west", west, 2}} {
		if got := used(t, s, c.key, c.limit); got != c.want {
			t.Errorf("%s: %d used, want %d", c.key, got, c.want)
		}
	}

	// An enforced denial denies whatever the quotas say; shadow limits
	// never deny, even beside quotas.
	tight := redlimit.PerMinute(1)
	reqs = []redlimit.Request{{Key: "t", Limit: tight, Cost: 1}, {Key: "q", Limit: redlimit.PerMinute(5), Cost: 1}, {Key: "s", Limit: tight, Cost: 1}}
	roles = []shadow.Role{shadow.Enforced, shadow.Quota, shadow.Shadow}
	if d, err := shadow.Decide(ctx, s, reqs, roles); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	if d, err := shadow.Decide(ctx, s, reqs[1:], roles[1:]); err != nil || !d.Allowed || d.Results[1].Allowed {
		t.Fatalf("quota and spent shadow: %+v, %v; want allowed, the shadow limit denying", d, err)
	}
	if d, err := shadow.Decide(ctx, s, reqs, roles); err != nil || d.Allowed || d.QuotaDenied || !d.Results[1].Allowed {
		t.Fatalf("spent enforced limit: %+v, %v; want denied by it, the quota's own answer allowing", d, err)
	}
}
