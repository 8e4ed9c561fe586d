package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
)

// modelRules are fixed windows of an hour, counted as admissions, so that a
// simple reading of the file predicts every answer: the clock never moves.
// Rule c is a calendar day in Berlin, one window while the clock stands.
const modelRules = `domain: m
algorithm: fixed_window
counting: admission
descriptors:
  - key: a
    rate_limit: {name: ra, unit: hour, requests_per_unit: 3}
  - key: b
    value: x
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: d
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: u
    rate_limit: {unlimited: true}
  - key: r
    rate_limit: {unit: hour, requests_per_unit: 5, replaces: [{name: ra}]}
  - key: w
    value: "x*"
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: s
    value: "x*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 3, counting: debit}
  - key: ks
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2, counting: debit}
  - key: kq
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2, counting: debit}
  - key: au
    rate_limit: {unit: hour, requests_per_unit: 3, counting: auto}
  - key: sq
    value: x
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: day, requests_per_unit: 3, time_zone: Europe/Berlin}
`

// modelRule is what the reference reads of a rule of modelRules.
type modelRule struct {
	limit                             int64
	shadow, quota, denyAll, unlimited bool
	name                              string
	replaces                          string
	share                             bool
	counting                          string
	calendar                          bool // a calendar day, not an hour
}

// modelMatch is the reference's reading of modelRules: the rule a
// one-entry descriptor matches, and the key its count is kept under.
func modelMatch(k, v string) (*modelRule, string) {
	key := k + "=" + v
	switch k {
	case "a":
		return &modelRule{limit: 3, name: "ra"}, key
	case "b":
		if v == "x" {
			return &modelRule{limit: 2, shadow: true}, key
		}
		return &modelRule{limit: 4}, key
	case "q1":
		return &modelRule{limit: 2, quota: true}, key
	case "q2":
		return &modelRule{limit: 3, quota: true}, key
	case "d":
		return &modelRule{denyAll: true}, key
	case "u":
		return &modelRule{unlimited: true}, key
	case "r":
		return &modelRule{limit: 5, replaces: "ra"}, key
	case "w":
		if strings.HasPrefix(v, "x") {
			return &modelRule{limit: 2}, key
		}
	case "s":
		if strings.HasPrefix(v, "x") {
			return &modelRule{limit: 3}, "s=x*"
		}
	case "k":
		return &modelRule{limit: 3, counting: "debit"}, key
	case "ks":
		return &modelRule{limit: 2, shadow: true, counting: "debit"}, key
	case "kq":
		return &modelRule{limit: 2, quota: true, counting: "debit"}, key
	case "au":
		return &modelRule{limit: 3, counting: "auto"}, key
	case "sq":
		if v == "x" {
			return &modelRule{limit: 1, shadow: true, quota: true}, key
		}
	case "c":
		return &modelRule{limit: 3, calendar: true}, key
	}
	return nil, ""
}

type modelItem struct {
	desc    int
	key     string
	limit   int64
	key2    string // under no-raise, the rule's own key beside an override's; or ""
	limit2  int64
	denyAll bool
	cost    int64 // 0: a check
	role    int   // 0 enforced, 1 quota, 2 shadow
	debit   bool
	allowed bool
	left    int64 // a check's: what is left before the request
}

// modelPeriods are the periods of the units the model's overrides use.
var modelPeriods = map[typepb.RateLimitUnit]time.Duration{
	typepb.RateLimitUnit_MINUTE: time.Minute, typepb.RateLimitUnit_HOUR: time.Hour, typepb.RateLimitUnit_DAY: 24 * time.Hour,
}

// modelOverride reads the limit override o of a descriptor k=v that
// matched r (nil if none): its count, and the key of its state. An
// override of a limited rule is counted by the rule's algorithm, so with
// the rules' period (an hour) it shares the state of the descriptor's
// own key; otherwise its state is its own. So does an override of a day
// on calendar rule c: it counts in the rule's calendar. raises reports
// whether it raises r (more at once, or a higher rate, a calendar day
// taken as its longest).
func modelOverride(o *rlpb.RateLimitDescriptor_RateLimitOverride, r *modelRule, k, v string) (count int64, key string, raises bool) {
	period := modelPeriods[o.Unit]
	if o.UnitMultiplier != nil {
		period *= time.Duration(o.UnitMultiplier.Value)
	}
	count, key = int64(o.RequestsPerUnit), k+"="+v
	limited := r != nil && !r.unlimited
	rulePeriod := time.Hour
	if limited && r.calendar {
		rulePeriod = redlimit.Day.Longest()
		if period == 24*time.Hour {
			period = rulePeriod
		}
	}
	if !limited {
		key += "/default/" + period.String()
	} else if period != rulePeriod {
		key += "/" + period.String()
	}
	if limited {
		raises = r.denyAll || count > r.limit || count*int64(rulePeriod) > r.limit*int64(period)
	}
	return count, key, raises
}

// modelDecide answers a request as the package documentation says, on
// counts, and updates them: it returns the overall code and each status.
// checks holds, by descriptor, what a check (hits_addend 0) has left
// (limit_remaining), or -1. A request with an override the policy
// refuses is an error (ok false),
// which counts nothing. Under no-raise, an override of a limited rule not
// in shadow mode is decided with the rule's own limit: both must admit.
func modelDecide(counts map[string]int64, descs []*rlpb.RateLimitDescriptor, reqHits uint32, quotaMode, shadowAll, noRaise bool) (allowed bool, statuses []bool, checks []int64, ok bool) {
	replaced := map[string]bool{}
	rules := make([]*modelRule, len(descs))
	keys := make([]string, len(descs))
	for i, d := range descs {
		rules[i], keys[i] = modelMatch(d.Entries[0].Key, d.Entries[0].Value)
		if rules[i] != nil && rules[i].replaces != "" && d.Limit == nil {
			replaced[rules[i].replaces] = true
		}
	}
	var items []*modelItem
	quotaFree := false
	for i, d := range descs {
		r := rules[i]
		if d.Limit == nil && (r == nil || (!r.unlimited && r.name != "" && replaced[r.name])) {
			quotaFree = quotaFree || quotaMode
			continue
		}
		if d.Limit == nil && r.unlimited {
			continue
		}
		cost := int64(max(1, reqHits))
		if d.HitsAddend != nil {
			cost = int64(d.HitsAddend.Value)
		}
		counting := "auto" // the service's: an override matching no limited rule
		if r != nil && !r.unlimited {
			counting = r.counting
		}
		debit := cost > 0 && (counting == "debit" || counting == "auto" && d.HitsAddend != nil)
		it := &modelItem{desc: i, cost: cost, debit: debit}
		if d.Limit != nil {
			count, key, raises := modelOverride(d.Limit, r, d.Entries[0].Key, d.Entries[0].Value)
			if noRaise && raises {
				return false, nil, nil, false
			}
			it.key, it.limit = key, count
			if noRaise && r != nil && !r.unlimited && !r.shadow && key != keys[i] {
				it.key2, it.limit2 = keys[i], r.limit
			}
			switch {
			case shadowAll:
				it.role = 2
			case quotaMode:
				it.role = 1
			}
		} else {
			it.key, it.limit, it.denyAll = keys[i], r.limit, r.denyAll
			switch {
			case r.shadow || shadowAll:
				it.role = 2
			case r.quota || quotaMode:
				it.role = 1
			}
		}
		items = append(items, it)
	}
	fits := func(key string, limit, cost int64) bool { return counts[key]+cost <= limit }
	// Checks and deny-alls first.
	enforcedDenied, quotaRoom, consumingQuotas, anyQuota := false, quotaFree, 0, false
	for _, it := range items {
		anyQuota = anyQuota || it.role == 1
		switch {
		case it.denyAll:
			it.allowed = false
		case it.cost == 0:
			it.allowed = fits(it.key, it.limit, 1) && (it.key2 == "" || fits(it.key2, it.limit2, 1))
			it.left = max(0, it.limit-counts[it.key])
			if it.key2 != "" {
				it.left = min(it.left, max(0, it.limit2-counts[it.key2]))
			}
		default:
			if it.role == 1 {
				consumingQuotas++
			}
			continue
		}
		if it.role == 1 && it.allowed {
			quotaRoom = true
		}
		if it.role == 0 && !it.allowed {
			enforcedDenied = true
		}
	}
	// Consuming limits, merged by key.
	type group struct {
		key   string
		limit int64
		cost  int64
		role  int
		debit bool
		items []*modelItem
	}
	var groups []*group
	byKey := map[string]*group{}
	add := func(it *modelItem, key string, limit int64) {
		g := byKey[key]
		if g == nil {
			g = &group{key: key, limit: limit, role: it.role}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.cost += it.cost
		g.limit = min(g.limit, limit) // the tighter limit of one state
		g.role = min(g.role, it.role)
		g.debit = g.debit || it.debit
		g.items = append(g.items, it)
	}
	for _, it := range items {
		if it.denyAll || it.cost == 0 {
			continue
		}
		add(it, it.key, it.limit)
		if it.key2 != "" {
			add(it, it.key2, it.limit2)
		}
	}
	if quotaRoom {
		for _, g := range groups {
			if g.role == 1 {
				g.role = 2
			}
		}
	}
	denied := enforcedDenied || (anyQuota && !quotaRoom && consumingQuotas == 0)
	fitsNow := map[*group]bool{}
	for _, g := range groups {
		fitsNow[g] = fits(g.key, g.limit, g.cost)
		for _, it := range g.items {
			it.allowed = true
		}
	}
	for _, g := range groups {
		for _, it := range g.items {
			it.allowed = it.allowed && fitsNow[g]
		}
	}
	if !denied {
		quotas, quotasOK := 0, 0
		for _, g := range groups {
			if g.role == 0 && !fitsNow[g] {
				denied = true
			}
			if g.role == 1 {
				quotas++
				if fitsNow[g] {
					quotasOK++
				}
			}
		}
		if quotas > 0 && quotasOK == 0 {
			denied = true
		}
	}
	for _, g := range groups {
		if g.debit || (!denied && fitsNow[g]) {
			counts[g.key] += g.cost
		}
	}
	statuses, checks = make([]bool, len(descs)), make([]int64, len(descs))
	for i := range statuses {
		statuses[i], checks[i] = true, -1
	}
	for _, it := range items {
		statuses[it.desc] = it.allowed || it.role == 2
		if it.cost == 0 {
			checks[it.desc] = it.left
		}
	}
	return !denied, statuses, checks, true
}

// TestModelDecisions compares the service's answers with modelDecide's, a
// direct reading of the package documentation, over random requests to
// modelRules: overall code, every status.
func TestModelDecisions(t *testing.T) {
	t.Parallel()
	cands := [][2]string{{"a", "x"}, {"a", "y"}, {"b", "x"}, {"b", "y"}, {"q1", "x"}, {"q2", "x"},
		{"d", "x"}, {"u", "x"}, {"r", "x"}, {"w", "x"}, {"w", "xz"}, {"w", "y"}, {"s", "x"}, {"s", "xz"}, {"sq", "x"}, {"z", "x"}, {"s", "x*"}, {"w", "x*"}, {"k", "x"}, {"k", "y"}, {"ks", "x"}, {"kq", "x"}, {"au", "x"}, {"c", "x"}}
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		quotaMode, shadowAll, noRaise := seed%3 == 1, seed%5 == 4, seed%4 < 2
		policy := OverridesAllow
		if noRaise {
			policy = OverridesNoRaise
		}
		f := newFixture(t, Options{QuotaMode: quotaMode, Shadow: shadowAll, Overrides: policy})
		f.svc.SetConfig(parsed(t, modelRules))
		counts := map[string]int64{}
		var log []string
		for step := range 30 {
			n := 1 + rng.IntN(4)
			var descs []*rlpb.RateLimitDescriptor
			for range n {
				c := cands[rng.IntN(len(cands))]
				d := desc(c[0], c[1])
				switch x := rng.IntN(10); {
				case x == 0:
					d.HitsAddend = wrapperspb.UInt64(0)
				case x <= 2:
					d.HitsAddend = wrapperspb.UInt64(uint64(1 + rng.IntN(3)))
				}
				if rng.IntN(5) == 0 {
					units := []typepb.RateLimitUnit{typepb.RateLimitUnit_MINUTE, typepb.RateLimitUnit_HOUR, typepb.RateLimitUnit_DAY}
					withOverride(d, uint32(1+rng.IntN(4)), units[rng.IntN(len(units))], uint32(rng.IntN(3)))
				}
				descs = append(descs, d)
			}
			reqHits := uint32(rng.IntN(3))
			req := &pb.RateLimitRequest{Domain: "m", Descriptors: descs, HitsAddend: reqHits}
			var b strings.Builder
			fmt.Fprintf(&b, "hits %d:", reqHits)
			for _, d := range descs {
				fmt.Fprintf(&b, " %s=%s", d.Entries[0].Key, d.Entries[0].Value)
				if d.HitsAddend != nil {
					fmt.Fprintf(&b, "(+%d)", d.HitsAddend.Value)
				}
				if o := d.Limit; o != nil {
					fmt.Fprintf(&b, "[%d/%s x%d]", o.RequestsPerUnit, o.Unit, o.UnitMultiplier.GetValue())
				}
			}
			log = append(log, b.String())
			wantOK, wantSt, wantLeft, valid := modelDecide(counts, descs, reqHits, quotaMode, shadowAll, noRaise)
			got, want := "error", "error"
			if resp, err := f.svc.ShouldRateLimit(context.Background(), req); err == nil {
				got = sig(resp)
				for i, left := range wantLeft {
					if r := resp.Statuses[i].LimitRemaining; valid && left >= 0 && int64(r) != left {
						got += fmt.Sprintf(" (check %d: %d left)", i, r)
					}
				}
			}
			if valid {
				want = "O:"
				if !wantOK {
					want = "X:"
				}
				for _, ok := range wantSt {
					if ok {
						want += "O"
					} else {
						want += "X"
					}
				}
			}
			if got != want {
				t.Fatalf("seed %d (quota mode %t, shadow %t, overrides %s) step %d: got %s, want %s\nrequests:\n  %s\ncounts after (model): %v",
					seed, quotaMode, shadowAll, policy, step, got, want, strings.Join(log, "\n  "), counts)
			}
		}
	}
}
