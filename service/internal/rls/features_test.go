package rls

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/service/internal/config"
)

// parsed returns the configuration of YAML rule files, or fails the test.
func parsed(t *testing.T, files ...string) *config.Config {
	t.Helper()
	var ds []*config.Domain
	for i, src := range files {
		d, err := config.Parse(string(rune('a'+i))+".yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return mustConfig(t, ds...)
}

// The counting rules are token buckets of 1,000 a minute (one token every
// 60 ms), so that what a request left behind shows in what a check finds
// later.
const countingRules = `domain: tokens
algorithm: token_bucket
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 1000, counting: admission}
  - key: key
    rate_limit: {unit: minute, requests_per_unit: 1000, counting: debit}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

const countingFileRules = `domain: billing
algorithm: token_bucket
counting: debit
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: job
    rate_limit: {unit: minute, requests_per_unit: 1000, counting: admission}
`

// TestCounting documents the counting knob: each descriptor's hits are an
// admission or a debit, by its rule's counting, else its file's, else
// Options.Counting, else auto, which debits a descriptor carrying its own
// hits_addend (Envoy's check-then-debit flow). Each case empties its
// bucket, sends its request, which does not fit, and checks 30 s later
// (500 tokens back): an admission was denied and consumed nothing, so the
// check finds 500 tokens; a debit was counted over the limit, so it finds
// 500 less its cost.
func TestCounting(t *testing.T) {
	t.Parallel()
	cfg := parsed(t, countingRules, countingFileRules)
	for _, tc := range []struct {
		name     string
		counting config.Counting // Options.Counting
		req      *pb.RateLimitRequest
		debit    bool
	}{
		{"auto: a check (hits_addend 0)", 0, request("tokens", withHits(desc("user", "u"), 0)), false},
		{"auto: a plain request", 0, request("tokens", desc("user", "u")), false},
		{"auto: the request's hits_addend weighs an admission", 0, &pb.RateLimitRequest{Domain: "tokens", HitsAddend: 5, Descriptors: []*rlpb.RateLimitDescriptor{desc("user", "u")}}, false},
		{"auto: the descriptor's own hits_addend is a debit", 0, request("tokens", withHits(desc("user", "u"), 900)), true},
		{"auto: a debit of 1 too", 0, request("tokens", withHits(desc("user", "u"), 1)), true},
		{"rule admission", 0, request("tokens", withHits(desc("ip", "i"), 300)), false},
		{"rule debit, plain", 0, request("tokens", desc("key", "k")), true},
		{"rule debit, a check", 0, request("tokens", withHits(desc("key", "k"), 0)), false},
		{"file debit", 0, &pb.RateLimitRequest{Domain: "billing", HitsAddend: 7, Descriptors: []*rlpb.RateLimitDescriptor{desc("tenant", "t")}}, true},
		{"file debit, rule admission", 0, request("billing", withHits(desc("job", "j"), 900)), false},
		{"global admission", config.CountingAdmission, request("tokens", withHits(desc("user", "u"), 900)), false},
		{"global admission, rule debit", config.CountingAdmission, request("tokens", withHits(desc("key", "k"), 20)), true},
		{"global debit", config.CountingDebit, request("tokens", desc("user", "u")), true},
		{"global debit, rule admission", config.CountingDebit, request("tokens", desc("ip", "i")), false},
		{"global admission, file debit", config.CountingAdmission, request("billing", desc("tenant", "t")), true},
		{"a shadow rule's debit is counted too", 0, request("tokens", withHits(desc("trial", "x"), 100)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Options{Counting: tc.counting})
			f.svc.SetConfig(cfg)
			d := tc.req.Descriptors[0]
			empty := &pb.RateLimitRequest{Domain: tc.req.Domain, HitsAddend: 1000, Descriptors: []*rlpb.RateLimitDescriptor{desc(d.Entries[0].Key, d.Entries[0].Value)}}
			if resp := f.do(empty); resp.OverallCode != pb.RateLimitResponse_OK || remaining(resp)[0] != 0 {
				t.Fatalf("emptying the bucket: %v", resp)
			}
			resp := f.do(tc.req)
			st := resp.Statuses[0]
			// A shadow rule answers OK whatever it counts.
			shadowed := d.Entries[0].Key == "trial"
			if (st.Code == pb.RateLimitResponse_OVER_LIMIT) == shadowed || st.LimitRemaining != 0 {
				t.Fatalf("a request that does not fit: %v", st)
			}
			f.clock.Advance(30 * time.Second)
			cost := int64(max(1, tc.req.HitsAddend))
			if d.HitsAddend != nil {
				cost = int64(d.HitsAddend.Value)
			}
			left := int64(500)
			if tc.debit {
				left -= cost
			}
			want := pb.RateLimitResponse_OK
			wantRem := uint32(max(0, left)) // a check tells what is left
			if left < 1 {
				want, wantRem = pb.RateLimitResponse_OVER_LIMIT, 0
			}
			check := request(tc.req.Domain, withHits(desc(d.Entries[0].Key, d.Entries[0].Value), 0))
			if st := f.do(check).Statuses[0]; st.Code != want || st.LimitRemaining != wantRem {
				t.Errorf("the check 30 s later: %v %d left, want %v %d (debit %v, cost %d)", st.Code, st.LimitRemaining, want, wantRem, tc.debit, cost)
			}
		})
	}

	// A debit beside an admission, the debit not fitting: the request is
	// denied, the admission consumes nothing, the debit is counted.
	f := newFixture(t, Options{})
	f.svc.SetConfig(cfg)
	f.do(request("tokens", withHits(desc("user", "u"), 1000)))
	if resp := f.do(request("tokens", desc("ip", "i"), withHits(desc("user", "u"), 400))); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("mixed: %v", resp)
	}
	f.clock.Advance(30 * time.Second)
	resp := f.do(request("tokens", withHits(desc("ip", "i"), 0), withHits(desc("user", "u"), 0)))
	if got := remaining(resp); got[0] != 1000 || got[1] != 100 {
		t.Errorf("mixed, then checks 30 s later: %v left, want [1000 100]: the admission beside the denied debit took nothing, the debit of 400 was counted", got)
	}

	// A deny-all rule denies the request before the limiter is asked: the
	// debit beside it is counted all the same.
	f = newFixture(t, Options{})
	f.svc.SetConfig(cfg)
	resp = f.do(request("tokens", desc("blocked", "b"), withHits(desc("user", "u"), 600)))
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || resp.Statuses[1].Code != pb.RateLimitResponse_OK || resp.Statuses[1].LimitRemaining != 400 {
		t.Fatalf("a debit beside a deny-all rule: %v", resp)
	}
	if got := remaining(f.do(request("tokens", withHits(desc("user", "u"), 0)))); got[0] != 400 {
		t.Errorf("after a debit of 600 beside a deny-all rule, a check finds %d left, want 400", got[0])
	}

	if _, err := New(Options{Limiter: f.store, Counting: config.CountingDebit + 1}); err == nil {
		t.Error("an unknown Options.Counting was taken")
	}
}

const quotaRules = `domain: q
algorithm: fixed_window
descriptors:
  - key: east
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {backend: east}
  - key: west
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata: {backend: west}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {plan: gold}
  - key: shadowed
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// TestQuotaMode checks quota_mode, envoyproxy/ratelimit's: a request is
// denied for its quotas only when all of them are spent, and then consumes
// nothing; a spent quota is OVER_LIMIT in its own status, and a quota with
// room is consumed. Its global switch makes every limit a quota, and a
// descriptor without a limit a quota with room.
func TestQuotaMode(t *testing.T) {
	t.Parallel()
	cfg := parsed(t, quotaRules)
	f := newFixture(t, Options{Headers: ratelimitfield.All})
	f.svc.SetConfig(cfg)
	east, west, user := func() *rlpb.RateLimitDescriptor { return desc("east", "1") },
		func() *rlpb.RateLimitDescriptor { return desc("west", "1") },
		func() *rlpb.RateLimitDescriptor { return desc("user", "u") }
	f.run([]step{
		{"both quotas with room", request("q", user(), east(), west()), 0, "O:OOO"},
		{"east spent: west consumed", request("q", user(), east(), west()), 0, "O:OXO"},
	})
	resp := f.do(request("q", user(), east(), west()))
	if sig(resp) != "X:OXX" {
		t.Fatalf("both spent: %s, want X:OXX", sig(resp))
	}
	// Denied for its quotas: Retry-After is when the first could pass
	// (east, within a minute; west's is within the hour).
	if h := header(resp, ratelimitfield.HeaderRetryAfter); h == "" || h > "60" || len(h) > 2 {
		t.Errorf("Retry-After %q, want east's, at most 60", h)
	}
	// ...and consumed nothing: the user's limit has 3 left, one per
	// request allowed.
	if resp := f.do(request("q", user())); remaining(resp)[0] != 2 {
		t.Errorf("user: %d remaining after the quota denial, want 2", remaining(resp)[0])
	}
	// A quota over its limit while the request passes adds no header field.
	f.clock.Advance(time.Minute + time.Second) // east back; west stays spent
	resp = f.do(request("q", east(), west()))
	if sig(resp) != "O:OX" || strings.Contains(header(resp, ratelimitfield.HeaderRateLimitPolicy), "west") || header(resp, ratelimitfield.HeaderRetryAfter) != "" {
		t.Errorf("west spent, east with room: %s %v", sig(resp), resp.ResponseHeadersToAdd)
	}
	// Checks (hits_addend 0): one with room satisfies the quotas.
	f.clock.Advance(2 * time.Minute)
	check := request("q", withHits(east(), 0), withHits(west(), 0))
	if resp := f.do(check); sig(resp) != "O:OX" {
		t.Errorf("check, east with room: %s", sig(resp))
	}
	f.do(request("q", east()))
	if resp := f.do(check); sig(resp) != "X:XX" {
		t.Errorf("check, both spent: %s", sig(resp))
	}
	// A quota in shadow mode is a shadow limit: it never denies.
	f.run([]step{{"shadow quota", request("q", desc("shadowed", "s")), 3, "O:O"}})

	// Global quota mode: every limit a quota; a descriptor without one
	// (unmatched, but not unlimited) is a quota with room.
	g := newFixture(t, Options{QuotaMode: true})
	g.svc.SetConfig(cfg)
	a, b := desc("a", "1"), desc("b", "1")
	g.run([]step{
		{"global: both with room", request("q", a, b), 0, "O:OO"},
		{"global: both spent", request("q", a, b), 0, "X:XX"},
		{"global: both spent, an unlimited one", request("q", a, b, desc("free", "f")), 0, "X:XXO"},
		{"global: both spent, one without a limit", request("q", a, b, desc("none", "n")), 0, "O:XXO"},
	})
}

// header returns the value of the response header field name, or "".
func header(resp *pb.RateLimitResponse, name string) string {
	for _, h := range resp.ResponseHeadersToAdd {
		if strings.EqualFold(h.Key, name) {
			return h.Value
		}
	}
	return ""
}

// TestDynamicMetadata checks the response's dynamic metadata, as
// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA sets it: off by
// default; on, the domain, the descriptors, the hits_addend, and the
// metadata of the rules passed, the first's winning, never modifying the
// configuration's.
func TestDynamicMetadata(t *testing.T) {
	t.Parallel()
	cfg := parsed(t, quotaRules+`  - key: nested
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {backend: nested, plan: {tier: silver, extra: 1}}
  - key: nested2
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {plan: {tier: bronze, more: 2}}
`)
	before := proto.Clone(cfg.Match("q", []config.Entry{{Key: "nested", Value: "x"}}).Metadata)

	off := newFixture(t, Options{})
	off.svc.SetConfig(cfg)
	if resp := off.do(request("q", desc("user", "u"))); resp.DynamicMetadata != nil {
		t.Errorf("metadata without DynamicMetadata: %v", resp.DynamicMetadata)
	}

	f := newFixture(t, Options{DynamicMetadata: true})
	f.svc.SetConfig(cfg)
	override := desc("user", "v")
	override.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_MINUTE}
	req := &pb.RateLimitRequest{Domain: "q", HitsAddend: 2, Descriptors: []*rlpb.RateLimitDescriptor{
		desc("nested", "x"), withHits(desc("nested2", "x"), 1), desc("user", "u"), override,
	}}
	req.Descriptors[1].HitsAddend = nil // auto would make it a debit
	resp := f.do(req)
	got, err := protojson.Marshal(resp.DynamicMetadata)
	if err != nil {
		t.Fatal(err)
	}
	var norm bytes.Buffer
	if err := jsonCompact(&norm, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"domain":"q"`,
		`"hitsAddend":2`,
		`{"entries":["nested=x"]}`,
		`{"entries":["user=u"]}`,
		`"metadata":{"backend":"nested","plan":{"extra":1,"more":2,"tier":"silver"}}`,
	} {
		if !strings.Contains(norm.String(), want) {
			t.Errorf("metadata %s\ndoes not hold %s", norm.String(), want)
		}
	}
	if !strings.Contains(norm.String(), `"entries":["user=v"],"limit":`) {
		t.Errorf("the override descriptor's limit is missing: %s", norm.String())
	}
	if after := cfg.Match("q", []config.Entry{{Key: "nested", Value: "x"}}).Metadata; !proto.Equal(before, after) {
		t.Errorf("the configuration's metadata changed: %v, was %v", after, before)
	}

	// Unknown domain: no descriptor passed a rule, no "metadata".
	resp = f.do(request("elsewhere", desc("k", "v")))
	if resp.DynamicMetadata.GetFields()["domain"].GetStringValue() != "elsewhere" || resp.DynamicMetadata.GetFields()["metadata"] != nil {
		t.Errorf("unknown domain: %v", resp.DynamicMetadata)
	}
}

// jsonCompact writes protojson's output without its (unstable) spaces.
func jsonCompact(w *bytes.Buffer, b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	out, err := json.Marshal(v)
	w.Write(out)
	return err
}

// TestUnitMultiplier checks a period of several units: counted over the
// whole period, and answered in current_limit.unit_multiplier.
func TestUnitMultiplier(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{})
	f.svc.SetConfig(parsed(t, `domain: m
descriptors:
  - key: k
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 2, algorithm: fixed_window}
  - key: one
    rate_limit: {unit: second, requests_per_unit: 2}
`))
	req := request("m", desc("k", "v"))
	resp := f.do(req)
	cur := resp.Statuses[0].CurrentLimit
	if cur.Unit != pb.RateLimitResponse_RateLimit_SECOND || cur.UnitMultiplier.GetValue() != 30 || cur.RequestsPerUnit != 2 {
		t.Errorf("current_limit %v, want 2 per 30 seconds", cur)
	}
	if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= time.Second || d > 30*time.Second {
		t.Errorf("duration_until_reset %s, want the end of the 30-second window", d)
	}
	f.run([]step{{"second", req, 0, "O:O"}, {"third", req, 0, "X:X"}})
	f.clock.Advance(10 * time.Second)
	f.run([]step{{"10 seconds on, same window", req, 0, "X:X"}})
	f.clock.Advance(30 * time.Second)
	f.run([]step{{"the next window", req, 0, "O:O"}})
	if resp := f.do(request("m", desc("one", "v"))); resp.Statuses[0].CurrentLimit.UnitMultiplier != nil {
		t.Errorf("one unit: unit_multiplier %v, want none", resp.Statuses[0].CurrentLimit.UnitMultiplier)
	}
}

// TestValueToMetricLabels checks that the labels naming a request's values
// (value_to_metric as detailed_metric) are bounded as detailed_metric's are.
func TestValueToMetricLabels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{MaxDetailedSeries: 2})
	f.svc.SetConfig(parsed(t, `domain: v
descriptors:
  - key: route
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`))
	for _, v := range []string{"a", "b", "a", "c"} {
		f.do(request("v", desc("route", v)))
	}
	for key, want := range map[string]int{
		"v v.route_a allowed store": 2,
		"v v.route_b allowed store": 1,
		"v v.route allowed store":   1, // past the bound: the rule's path
	} {
		if n := f.obs.count(key); n != want {
			t.Errorf("%q observed %d times, want %d", key, n, want)
		}
	}
}
