package rls

import (
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// hitRecorder is a recorder that also counts hits as envoyproxy/ratelimit.
type hitRecorder struct {
	recorder
	hmu  sync.Mutex
	hits map[string]EnvoyHits // by rule label
}

func (r *hitRecorder) Hits(domain, rule string, h EnvoyHits) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.hits == nil {
		r.hits = map[string]EnvoyHits{}
	}
	r.hits[rule] = r.hits[rule].Add(h)
}

func (r *hitRecorder) of(rule string) EnvoyHits {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.hits[rule]
}

// TestEnvoyHits checks that hits are counted as envoyproxy/ratelimit's base
// limiter counts them: per hit, hits_addend included, near_limit above
// floor(limit × ratio), over_limit and shadow_mode the hits past the limit.
func TestEnvoyHits(t *testing.T) {
	fw := func(n int64) redlimit.Limit {
		return redlimit.Limit{Algorithm: redlimit.FixedWindow, Count: n, Period: time.Minute}
	}
	shadow := rule("api.shadowed", "", fw(2), "minute")
	shadow.Shadow = true
	d := domain("api",
		node("user", "", rule("api.user", "", fw(10), "minute")),
		node("shadowed", "", shadow),
		node("open", "", &config.Rule{Path: "api.open", Unlimited: true}),
	)
	obs := &hitRecorder{}
	f := newFixture(t, Options{Observer: obs, Counting: config.CountingAdmission}, d)
	steps := []struct {
		key  string
		hits uint64
		want string // the response's signature
	}{
		{"a", 5, "O:O"}, // within 5
		{"a", 4, "O:O"}, // within 4, near 1 (9 > 8)
		{"a", 1, "O:O"}, // within 1, near 1
		{"a", 3, "X:X"}, // over 3: the limit was already reached
		{"b", 8, "O:O"}, // within 8, not near (8 is the threshold)
		{"b", 5, "X:X"}, // over 3, near 2
	}
	for i, s := range steps {
		resp := f.do(request("api", withHits(desc("user", s.key), s.hits)))
		if got := sig(resp); got != s.want {
			t.Fatalf("step %d: %s, want %s", i, got, s.want)
		}
	}
	want := EnvoyHits{TotalHits: 26, WithinLimit: 18, NearLimit: 4, OverLimit: 6}
	if got := obs.of("api.user"); got != want {
		t.Errorf("api.user: %+v, want %+v", got, want)
	}
	f.do(request("api", withHits(desc("shadowed", "x"), 3)))
	want = EnvoyHits{TotalHits: 3, OverLimit: 1, NearLimit: 1, ShadowMode: 1}
	if got := obs.of("api.shadowed"); got != want {
		t.Errorf("api.shadowed: %+v, want %+v", got, want)
	}
	f.do(request("api", withHits(desc("open", "x"), 3)))
	if got := obs.of("api.open"); got != (EnvoyHits{}) {
		t.Errorf("api.open, unlimited: %+v, want nothing counted", got)
	}
}

// TestEnvoyHitsOf steps the arithmetic over a table, one descriptor each.
func TestEnvoyHitsOf(t *testing.T) {
	res := func(allowed bool, remaining int64) redlimit.Result {
		return redlimit.Result{Allowed: allowed, Remaining: remaining}
	}
	tests := []struct {
		name   string
		cost   int64
		max    int64
		res    redlimit.Result
		shadow bool
		ratio  float64
		want   EnvoyHits
	}{
		{"allowed below near", 3, 10, res(true, 7), false, 0.8, EnvoyHits{TotalHits: 3, WithinLimit: 3}},
		{"allowed across near", 3, 10, res(true, 1), false, 0.8, EnvoyHits{TotalHits: 3, WithinLimit: 3, NearLimit: 1}},
		{"allowed all near", 1, 10, res(true, 0), false, 0.8, EnvoyHits{TotalHits: 1, WithinLimit: 1, NearLimit: 1}},
		{"denied across limit", 5, 10, res(false, 2), false, 0.8, EnvoyHits{TotalHits: 5, OverLimit: 3, NearLimit: 2}},
		{"denied from below near", 10, 10, res(false, 5), false, 0.8, EnvoyHits{TotalHits: 10, OverLimit: 5, NearLimit: 2}},
		{"denied at limit", 2, 10, res(false, 0), false, 0.8, EnvoyHits{TotalHits: 2, OverLimit: 2}},
		{"shadow denied", 5, 10, res(false, 2), true, 0.8, EnvoyHits{TotalHits: 5, OverLimit: 3, NearLimit: 2, ShadowMode: 3}},
		{"deny all", 4, 0, res(false, 0), false, 0.8, EnvoyHits{TotalHits: 4, OverLimit: 4}},
		{"deny cache", 4, 10, redlimit.Result{Source: redlimit.FromDenyCache}, false, 0.8, EnvoyHits{TotalHits: 4, OverLimit: 4}},
		{"ratio 0.5", 6, 10, res(true, 4), false, 0.5, EnvoyHits{TotalHits: 6, WithinLimit: 6, NearLimit: 1}},
		{"a check", 0, 10, res(true, 10), false, 0.8, EnvoyHits{}},
		{"undecided", 2, 10, redlimit.Result{Source: redlimit.Undecided}, false, 0.8, EnvoyHits{TotalHits: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envoyHitsOf(tt.cost, tt.max, tt.res, tt.shadow, tt.ratio); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzEnvoyHits checks the invariants of the counts for any descriptor:
// an admission's hits are within the limit, a denial's over it or near
// it, and shadow_mode counts the hits over a shadow limit.
func FuzzEnvoyHits(f *testing.F) {
	f.Add(int64(3), int64(10), true, int64(1), false, 0.8)
	f.Add(int64(5), int64(10), false, int64(2), true, 0.5)
	f.Add(int64(4), int64(0), false, int64(0), false, 1.0)
	f.Fuzz(func(t *testing.T, cost, limit int64, allowed bool, remaining int64, shadow bool, ratio float64) {
		if cost < 0 || cost > redlimit.MaxCost || limit < 0 || limit > redlimit.MaxCost || !(ratio > 0 && ratio <= 1) {
			t.Skip()
		}
		h := envoyHitsOf(cost, limit, redlimit.Result{Allowed: allowed, Remaining: remaining}, shadow, ratio)
		switch {
		case h.TotalHits != uint64(cost):
			t.Fatalf("%+v: total_hits is not the cost %d", h, cost)
		case allowed && (h.WithinLimit != h.TotalHits || h.OverLimit != 0):
			t.Fatalf("%+v: an admission's hits are all within the limit", h)
		case !allowed && (h.WithinLimit != 0 || (cost > 0 && h.OverLimit == 0) || h.OverLimit+h.NearLimit > h.TotalHits):
			t.Fatalf("%+v: a denial's hits are over the limit, or near it (cost %d)", h, cost)
		}
		if h.NearLimit > h.TotalHits || (shadow && h.ShadowMode != h.OverLimit) || (!shadow && h.ShadowMode != 0) {
			t.Fatalf("%+v: near_limit or shadow_mode out of bounds (cost %d, shadow %v)", h, cost, shadow)
		}
	})
}
