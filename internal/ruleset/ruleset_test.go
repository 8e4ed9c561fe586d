package ruleset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
	"github.com/redlimit/redlimit/internal/rulesettest"
	"github.com/redlimit/redlimit/memory"
)

var (
	errNoKey   = ruleset.ErrNoKey
	errNoRules = errors.New("test: no rules")
	errInvalid = errors.New("test: invalid rule")
	kind       = &ruleset.Kind{Pkg: "test", Unit: "thing", ErrNoRules: errNoRules, ErrInvalidRule: errInvalid}
)

// req is the request type of the tests: a map of its keys by rule name.
type req map[string]string

// byName keys a req by its entry for name; no entry means no key.
func byName(name string) func(req) (string, error) {
	return func(r req) (string, error) {
		if k, ok := r[name]; ok {
			return k, nil
		}
		return "", fmt.Errorf("%w: no %s", errNoKey, name)
	}
}

func rule(name string, l redlimit.Limit, shadow bool) ruleset.Rule[req] {
	return ruleset.Rule[req]{Name: name, Limit: l, Key: byName(name), Shadow: shadow}
}

func newSet(t *testing.T, rules ...ruleset.Rule[req]) *ruleset.Set[req] {
	t.Helper()
	s, err := ruleset.New(kind, rules)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newStore(t *testing.T) *memory.Store {
	t.Helper()
	lim, err := memory.New(memory.WithClock(rulesettest.FixedNow()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	return lim
}

func TestNew(t *testing.T) {
	t.Parallel()
	ok := rule("ok", redlimit.PerSecond(2), false)
	with := func(f func(*ruleset.Rule[req])) ruleset.Rule[req] { r := ok; f(&r); return r }
	// Enforced and shadow rules go to one AllowAll: MaxRequests in all.
	both := make([]ruleset.Rule[req], redlimit.MaxRequests+1)
	for i := range both {
		both[i] = rule(fmt.Sprint("r", i), ok.Limit, i%2 == 0)
	}
	tests := []struct {
		name  string
		rules []ruleset.Rule[req]
		is    error
		msg   string
	}{
		{name: "no rules", is: errNoRules},
		{name: "empty name", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Name = "" })}, is: errInvalid},
		{name: "long name", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Name = strings.Repeat("a", ruleset.MaxNameLen+1) })}, is: errInvalid},
		{name: "bad name", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Name = "a:b" })}, is: errInvalid},
		{name: "duplicate", rules: []ruleset.Rule[req]{ok, ok}, is: errInvalid},
		{name: "zero limit", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Limit = redlimit.Limit{} })}, is: redlimit.ErrUnknownAlgorithm, msg: `test: rule "ok": `},
		{name: "no key", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Key = nil })}, is: errInvalid},
		{name: "cost", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Cost = 3 })}, is: errInvalid, msg: "no thing could pass"},
		{name: "negative cost", rules: []ruleset.Rule[req]{with(func(r *ruleset.Rule[req]) { r.Cost = -1 })}, is: errInvalid},
		{name: "too many", rules: both, is: errInvalid},
	}
	for _, tt := range tests {
		s, err := ruleset.New(kind, tt.rules)
		if s != nil || !errors.Is(err, tt.is) || !strings.Contains(fmt.Sprint(err), tt.msg) {
			t.Errorf("%s: New = %v, %v; want an error wrapping %v with %q", tt.name, s, err, tt.is, tt.msg)
		}
	}

	// Valid names, defaults, and as many rules as AllowAll takes.
	rules := []ruleset.Rule[req]{
		with(func(r *ruleset.Rule[req]) { r.Name = "Az09._-" }),
		with(func(r *ruleset.Rule[req]) { r.Name = strings.Repeat("b", ruleset.MaxNameLen); r.Cost = 2 }),
	}
	s := newSet(t, rules...)
	if len(s.Rules) != 2 || s.Rules[0].Cost != 1 || s.Rules[1].Cost != 2 || rules[0].Cost != 0 {
		t.Errorf("rules %+v (given %+v): want a copy with cost 1 by default", s.Rules, rules)
	}
	newSet(t, both[:redlimit.MaxRequests]...)
}

func TestApply(t *testing.T) {
	t.Parallel()
	l := redlimit.PerMinute(5)
	s := newSet(t, rule("a", l, false), rule("b", l, true), rule("c", l, false))
	applied, bad, err := s.Apply(req{"a": "x", "c": "y"}, "", nil)
	if err != nil || bad != nil {
		t.Fatalf("Apply: %v, %v", bad, err)
	}
	var got []string
	for _, a := range applied {
		got = append(got, fmt.Sprintf("%d %s %s", a.Index, a.Rule.Name, a.Key))
	}
	if want := []string{"0 a a:x", "2 c c:y"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied %q, want %q", got, want)
	}

	boom := errors.New("boom")
	s = newSet(t, rule("a", l, false),
		ruleset.Rule[req]{Name: "b", Limit: l, Key: func(req) (string, error) { return "", boom }},
		ruleset.Rule[req]{Name: "c", Limit: l, Key: func(req) (string, error) { return "", nil }})
	if _, bad, err := s.Apply(req{}, "", nil); !errors.Is(err, boom) || bad == nil || bad.Name != "b" {
		t.Errorf("failing key: %v, %v; want rule b and boom", bad, err)
	}
	s = newSet(t, ruleset.Rule[req]{Name: "c", Limit: l, Key: func(req) (string, error) { return "", nil }})
	if _, bad, err := s.Apply(req{}, "", nil); err == nil || bad == nil || bad.Name != "c" {
		t.Errorf("empty key: %v, %v; want rule c and an error", bad, err)
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lim := newStore(t)
	log, buf := rulesettest.NewLogger()
	s := newSet(t,
		rule("loose", redlimit.PerMinute(10), false),
		rule("tight", redlimit.PerMinute(3), false),
		rule("small", redlimit.PerMinute(1), true),
		rule("big", redlimit.PerMinute(100), true))
	r := req{"loose": "k", "tight": "k", "small": "k", "big": "k"}
	for i := range 4 {
		applied, _, err := s.Apply(r, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Decide(ctx, lim, log, applied, nil)
		if err != nil {
			t.Fatal(err)
		}
		denied, worst := v.Denied()
		if len(v.Results) != 4 || v.Results[2].Allowed != (i == 0) || !v.Results[3].Allowed {
			t.Fatalf("call %d: %+v; want every rule's answer, small allowing once, big always", i+1, v)
		}
		var quotas []string
		for _, q := range v.Quotas() {
			quotas = append(quotas, q.Name)
		}
		if fmt.Sprint(quotas) != "[loose tight]" {
			t.Errorf("call %d: quotas %v, want the enforced rules only", i+1, quotas)
		}
		switch {
		case i < 3:
			// The enforced rules allow; "big" counts even when "small"
			// would deny.
			if !v.Allowed || v.RetryAfter != 0 || len(denied) != 0 || worst != -1 {
				t.Fatalf("call %d: %+v, denied %v %d; want allowed", i+1, v, denied, worst)
			}
		default:
			// "tight" denies, and small would have: RetryAfter is tight's.
			if v.Allowed || v.RetryAfter != v.Results[1].RetryAfter || fmt.Sprint(denied) != "[1]" || worst != 1 {
				t.Fatalf("call %d: %+v, denied %v %d; want a denial by tight", i+1, v, denied, worst)
			}
		}
	}
	if res, _ := lim.Peek(ctx, "big:k", redlimit.PerMinute(100), 1); res.Remaining != 96 {
		t.Errorf("big: %d left after one more, want 96 (three counted)", res.Remaining)
	}
	if n := strings.Count(buf.String(), "test: shadow rule would deny"); n != 3 {
		t.Errorf("%d shadow denials logged, want 3 (one on the request tight denied):\n%s", n, buf)
	}

	// Only shadow rules, one of which fails the limit: the other still counts.
	s = newSet(t, rule("over", redlimit.PerMinute(1), true), rule("fine", redlimit.PerMinute(5), true))
	r = req{"over": "k2", "fine": "k2"}
	for range 2 {
		applied, _, _ := s.Apply(r, "", nil)
		v, err := s.Decide(ctx, lim, log, applied, nil)
		if err != nil || !v.Allowed || v.RetryAfter != 0 || len(v.Quotas()) != 0 {
			t.Fatalf("shadow only: %+v, %v", v, err)
		}
	}
	if res, _ := lim.Peek(ctx, "fine:k2", redlimit.PerMinute(5), 1); res.Remaining != 2 {
		t.Errorf("fine: %d left after one more, want 2", res.Remaining)
	}
}

// badLimiter answers AllowAll with one result too few, or fails.
type badLimiter struct {
	redlimit.Limiter
	err error
}

func (b badLimiter) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	return redlimit.Decision{Allowed: true, Results: make([]redlimit.Result, len(reqs)-1)}, b.err
}

func TestDecideErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := redlimit.PerMinute(5)
	boom := errors.New("boom")
	for _, shadow := range []bool{false, true} {
		for _, lim := range []badLimiter{{}, {err: boom}} {
			log, buf := rulesettest.NewLogger()
			s := newSet(t, rule("a", l, shadow))
			applied, _, _ := s.Apply(req{"a": "k"}, "", nil)
			v, err := s.Decide(ctx, lim, log, applied, nil)
			want := redlimit.ErrBadReply
			if lim.err != nil {
				want = boom
			}
			if shadow {
				// With only shadow rules, errors are logged only.
				if err != nil || !v.Allowed || v.Results != nil || !strings.Contains(buf.String(), "test: shadow rules not decided") {
					t.Errorf("shadow, %v: %+v, %v; log %s", lim.err, v, err, buf)
				}
				continue
			}
			if !errors.Is(err, want) {
				t.Errorf("enforced, %v: %v, want %v", lim.err, err, want)
			}
		}
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	type keyFunc func(req) (string, error)
	a, b := keyFunc(byName("a")), keyFunc(byName("b"))
	boom := errors.New("boom")
	bad := keyFunc(func(req) (string, error) { return "", boom })
	tests := []struct {
		name string
		key  keyFunc
		req  req
		want string
		is   error
	}{
		{name: "compose", key: ruleset.Compose(a, b), req: req{"a": "x", "b": "y"}, want: "x|y"},
		{name: "compose escapes", key: ruleset.Compose(a, b), req: req{"a": "x|%y", "b": "z"}, want: "x%7C%25y|z"},
		{name: "compose none", key: ruleset.Compose[req, keyFunc](), req: req{}, want: ""},
		{name: "compose missing", key: ruleset.Compose(a, b), req: req{"a": "x"}, is: errNoKey},
		{name: "compose error", key: ruleset.Compose(a, bad), req: req{"a": "x"}, is: boom},
		{name: "or first", key: ruleset.Or(a, b), req: req{"a": "x", "b": "y"}, want: "0:x"},
		{name: "or second", key: ruleset.Or(a, b), req: req{"b": "y"}, want: "1:y"},
		{name: "or none", key: ruleset.Or(a, b), req: req{}, is: errNoKey},
		{name: "or error", key: ruleset.Or(bad, b), req: req{"b": "y"}, is: boom},
		{name: "hashed", key: ruleset.Hashed(a), req: req{"a": "secret"}, want: "2bb80d537b1da3e38bd30361aa855686"},
		{name: "hashed missing", key: ruleset.Hashed(a), req: req{}, is: errNoKey},
	}
	for _, tt := range tests {
		got, err := tt.key(tt.req)
		if tt.is != nil {
			if !errors.Is(err, tt.is) {
				t.Errorf("%s: %q, %v; want %v", tt.name, got, err, tt.is)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}

	// The combinators keep their own copy of the list.
	keys := []keyFunc{a, b}
	c := ruleset.Compose(keys...)
	keys[1] = a
	if got, _ := c(req{"a": "x", "b": "y"}); got != "x|y" {
		t.Errorf("Compose after the caller changed its list: %q", got)
	}
}

// TestApplyPerRequest checks the limit, cost and route each request gets,
// and which bad input stops Apply, and which skips a rule.
func TestApplyPerRequest(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	// The request's "limit" entry is a count a minute; "cost" its cost.
	limitOf := func(r req) (redlimit.Limit, error) {
		switch v := r["limit"]; v {
		case "":
			return redlimit.Limit{}, boom
		case "none":
			return redlimit.Limit{}, fmt.Errorf("%w: no plan", errNoKey)
		default:
			var n int64
			fmt.Sscan(v, &n)
			return redlimit.PerMinute(n), nil
		}
	}
	costOf := func(r req) (int64, error) {
		var n int64
		if _, err := fmt.Sscan(r["cost"], &n); err != nil {
			return 0, boom
		}
		return n, nil
	}
	s := newSet(t,
		ruleset.Rule[req]{Name: "plan", Key: byName("k"), LimitFunc: limitOf, CostFunc: costOf},
		ruleset.Rule[req]{Name: "route", Route: "GET /x", Limit: redlimit.PerMinute(5), Key: byName("k")},
	)
	tests := []struct {
		name    string
		r       req
		route   string
		applied string // "name key limit cost" of each applied rule
		is      error  // what the error wraps, from rule plan
	}{
		{"chosen", req{"k": "a", "limit": "100", "cost": "7"}, "", "[plan plan:a 100/1m sliding_window 7]", nil},
		{"route", req{"k": "a", "limit": "100", "cost": "1"}, "GET /x", "[plan plan:a 100/1m sliding_window 1 route route:a 5/1m sliding_window 1]", nil},
		{"cost above the limit", req{"k": "a", "limit": "10", "cost": "11"}, "", "[plan plan:a 10/1m sliding_window 11]", nil},
		{"no plan skips", req{"k": "a", "limit": "none", "cost": "1"}, "GET /x", "[route route:a 5/1m sliding_window 1]", nil},
		{"no key skips", req{"limit": "", "cost": ""}, "", "[]", nil},
		{"limit fails", req{"k": "a", "cost": "1"}, "", "", boom},
		{"bad limit", req{"k": "a", "limit": "-3", "cost": "1"}, "", "", redlimit.ErrInvalidLimit},
		{"cost fails", req{"k": "a", "limit": "10", "cost": "x"}, "", "", boom},
		{"cost 0", req{"k": "a", "limit": "10", "cost": "0"}, "", "", redlimit.ErrInvalidCost},
		{"cost above MaxCost", req{"k": "a", "limit": "10", "cost": fmt.Sprint(int64(redlimit.MaxCost) + 1)}, "", "", redlimit.ErrInvalidCost},
	}
	for _, tt := range tests {
		applied, bad, err := s.Apply(tt.r, tt.route, nil)
		if tt.is != nil {
			if !errors.Is(err, tt.is) || bad == nil || bad.Name != "plan" {
				t.Errorf("%s: %v, %v; want rule plan and %v", tt.name, bad, err, tt.is)
			}
			continue
		}
		got := []string{}
		for _, a := range applied {
			got = append(got, a.Rule.Name, a.Key, a.Limit.String(), fmt.Sprint(a.Cost))
		}
		if err != nil || fmt.Sprint(got) != tt.applied {
			t.Errorf("%s: %v, %v; want %s", tt.name, got, err, tt.applied)
		}
	}

	// A shadow rule's bad input skips it, and is reported.
	sh := newSet(t, ruleset.Rule[req]{Name: "plan", Key: byName("k"), LimitFunc: limitOf, Shadow: true})
	var reported error
	applied, bad, err := sh.Apply(req{"k": "a"}, "", func(_ *ruleset.Rule[req], err error) { reported = err })
	if len(applied) != 0 || bad != nil || err != nil || !errors.Is(reported, boom) {
		t.Errorf("shadow: %v, %v, %v, reported %v", applied, bad, err, reported)
	}

	// A function's panic is its rule's error: enforced, it stops Apply;
	// shadow, it skips the rule and is reported.
	panics := func(r req) {
		if r["panic"] != "" {
			panic("boom")
		}
	}
	for _, shadow := range []bool{false, true} {
		for _, r := range []ruleset.Rule[req]{
			{Name: "key", Key: func(r req) (string, error) { panics(r); return "k", nil }, Limit: redlimit.PerMinute(5)},
			{Name: "limit", Key: byName("k"), LimitFunc: func(r req) (redlimit.Limit, error) { panics(r); return redlimit.PerMinute(5), nil }},
			{Name: "cost", Key: byName("k"), Limit: redlimit.PerMinute(5), CostFunc: func(r req) (int64, error) { panics(r); return 1, nil }},
		} {
			r.Shadow = shadow
			s := newSet(t, r)
			var reported error
			applied, bad, err := s.Apply(req{"k": "a", "panic": "1"}, "", func(_ *ruleset.Rule[req], err error) { reported = err })
			got := err
			if shadow {
				got = reported
			}
			if len(applied) != 0 || (bad == nil) == !shadow || got == nil || !strings.Contains(got.Error(), "panicked: boom") {
				t.Errorf("%s panics, shadow %v: %v, %v, %v, reported %v", r.Name, shadow, applied, bad, err, reported)
			}
			if applied, _, err := s.Apply(req{"k": "a"}, "", nil); len(applied) != 1 || err != nil {
				t.Errorf("%s, shadow %v, after a panic: %v, %v", r.Name, shadow, applied, err)
			}
		}
	}

	// New refuses a fixed value beside its function.
	for _, r := range []ruleset.Rule[req]{
		{Name: "a", Key: byName("k"), Limit: redlimit.PerMinute(5), LimitFunc: limitOf},
		{Name: "a", Key: byName("k"), Limit: redlimit.PerMinute(5), Cost: 1, CostFunc: costOf},
		{Name: "a", Key: byName("k"), LimitFunc: limitOf, Cost: int64(redlimit.MaxCost) + 1},
	} {
		if _, err := ruleset.New(kind, []ruleset.Rule[req]{r}); !errors.Is(err, errInvalid) {
			t.Errorf("%+v: %v, want errInvalid", r, err)
		}
	}
}
