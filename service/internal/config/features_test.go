package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// mustParse parses src or fails the test.
func mustParse(t *testing.T, src string) *Domain {
	t.Helper()
	d, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestParseUnitMultiplier checks periods of several units: unit_multiplier
// times the unit, 1 when absent (files without it load as before), shown
// in the view and kept within redlimit.MaxPeriod.
func TestParseUnitMultiplier(t *testing.T) {
	d := mustParse(t, `
domain: jobs
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10, unit_multiplier: 30}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 100, unit_multiplier: 5, algorithm: token_bucket}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 1000, unit_multiplier: 6}
  - key: d
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: e
    rate_limit: {unit: day, requests_per_unit: 0, unit_multiplier: 2}
  - key: f
    rate_limit: {unit: day, requests_per_unit: 1, unit_multiplier: 3660}
  - key: g
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 1}
`)
	want := []struct {
		period time.Duration
		mult   uint32
		view   string
	}{
		{30 * time.Second, 30, "30s"},
		{5 * time.Minute, 5, "5m0s"},
		{6 * time.Hour, 6, "6h0m0s"},
		{time.Minute, 1, "1m0s"},
		{48 * time.Hour, 2, "48h0m0s"},
		{redlimit.MaxPeriod, 3660, "87840h0m0s"},
		{time.Second, 1, "1s"},
	}
	rules := d.Rules()
	for i, r := range rules {
		w := want[i]
		if r.Limit.Period != w.period || r.UnitMultiplier != w.mult {
			t.Errorf("%s: period %s multiplier %d, want %s %d", r.Path, r.Limit.Period, r.UnitMultiplier, w.period, w.mult)
		}
		v := r.View()
		if v.Period != w.view || (w.mult > 1) != (v.UnitMultiplier == w.mult) || (w.mult == 1) != (v.UnitMultiplier == 0) {
			t.Errorf("%s: view period %s multiplier %d", r.Path, v.Period, v.UnitMultiplier)
		}
	}
	if r := rules[1]; r.Limit != redlimit.Per(100, 5*time.Minute).TokenBucket(100) {
		t.Errorf("token bucket of 5 minutes: %+v", r.Limit)
	}
	if !rules[4].DenyAll {
		t.Errorf("requests_per_unit 0 with a multiplier: %+v", rules[4])
	}
	b, _ := json.Marshal(rules[0])
	if !strings.Contains(string(b), `"unit":"second","unit_multiplier":30,"requests_per_unit":10,"period":"30s"`) {
		t.Errorf("JSON %s", b)
	}
	if b, _ := json.Marshal(rules[3]); strings.Contains(string(b), "unit_multiplier") {
		t.Errorf("JSON of one unit %s", b)
	}
}

// TestParseCounting checks the counting of rules: the rule's, else its
// file's, else CountingDefault; names are case-insensitive.
func TestParseCounting(t *testing.T) {
	d := mustParse(t, `
domain: tokens
counting: Debit
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 10, counting: admission}
  - key: key
    rate_limit: {unit: minute, requests_per_unit: 10, counting: auto}
`)
	want := []Counting{CountingDebit, CountingAdmission, CountingAuto}
	for i, r := range d.Rules() {
		if r.Counting != want[i] || r.View().Counting != want[i].String() {
			t.Errorf("%s: %v (view %q), want %v", r.Path, r.Counting, r.View().Counting, want[i])
		}
	}
	r := mustParse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n").Rules()[0]
	if r.Counting != CountingDefault || r.View().Counting != "" {
		t.Errorf("no counting: %v", r.Counting)
	}
	for _, c := range []Counting{CountingAuto, CountingAdmission, CountingDebit} {
		var got Counting
		text, err := c.MarshalText()
		if err != nil || got.UnmarshalText(text) != nil || got != c {
			t.Errorf("%v: round trip %q %v → %v", c, text, err, got)
		}
	}
	if _, err := CountingDefault.MarshalText(); err == nil {
		t.Error("CountingDefault has a name")
	}
	if _, err := ParseCounting(""); err == nil {
		t.Error(`ParseCounting("") succeeded`)
	}
}

// TestParseMetadata checks that metadata takes any YAML as
// envoyproxy/ratelimit's YAML 1.1 parser reads it, into the JSON-like
// values of the response's dynamic metadata.
func TestParseMetadata(t *testing.T) {
	d := mustParse(t, `
domain: routing
descriptors:
  - key: backend
    value: a
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata:
      text: service_1
      quoted: "yes"
      yes11: yes
      off11: off
      flag: true
      int: 0x10
      big: 12_000
      float: 2.5
      none: ~
      list: [1, two, {three: 3}]
      when: 2024-05-01
      <<: &base {inherited: 1, text: overridden}
      nested: {deeper: {deepest: [a]}}
  - key: backend
    value: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: *base
  - key: backend
    value: c
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {}
  - key: backend
    value: d
    metadata: {unused: true}
`)
	rules := d.Rules()
	got, _ := json.Marshal(rules[0].View().Metadata)
	want := `{"big":12000,"flag":true,"float":2.5,"inherited":1,"int":16,"list":[1,"two",{"three":3}],` +
		`"nested":{"deeper":{"deepest":["a"]}},"none":null,"off11":false,"quoted":"yes","text":"service_1","when":"2024-05-01","yes11":true}`
	if string(got) != want {
		t.Errorf("metadata\n got %s\nwant %s", got, want)
	}
	if got, _ := json.Marshal(rules[1].Metadata.AsMap()); string(got) != `{"inherited":1,"text":"overridden"}` {
		t.Errorf("metadata by alias: %s", got)
	}
	if rules[2].Metadata != nil || len(rules) != 3 {
		t.Errorf("empty metadata: %v; %d rules", rules[2].Metadata, len(rules))
	}
}

// TestMetricName checks the names envoyproxy/ratelimit gives the metrics
// of share_threshold, value_to_metric and detailed_metric rules, with the
// cases of its own tests.
func TestMetricName(t *testing.T) {
	c, err := New(mustParse(t, `
domain: test-domain
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - key: action
            rate_limit: {unit: minute, requests_per_unit: 150}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: plain
    detailed_metric: true
    descriptors:
      - key: leaf
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entries []Entry
		metric  string
		key     string
	}{
		{e("route", "api/v1", "method", "GET"), "test-domain.route_api/*.method", "api/*|GET"},
		{e("service", "svc/user", "endpoint", "get"), "test-domain.service_svc/*.endpoint_get", "svc/*|get"},
		{e("path", "path/foo", "file", "file/doc1", "type", "pdf"), "test-domain.path_path/*.file_file/*.type", "path/*|file/doc1|pdf"},
		{e("user", "user/alice", "resource", "res/file1", "action", "read"), "test-domain.user_user/*.resource_res/*.action", "user/*|res/*|read"},
		{e("file", "test1"), "test-domain.file_test1", "test1"},
		{e("file", "test23"), "test-domain.file_test*", "test*"},
		{e("plain", "", "leaf", "x"), "test-domain.plain_.leaf_x", "|x"},
	} {
		_, key, metric := matchNamed(t, c, "test-domain", tc.entries)
		if metric != tc.metric || strings.Join(key, "|") != tc.key {
			t.Errorf("%v: metric %q key %q, want %q %q", tc.entries, metric, strings.Join(key, "|"), tc.metric, tc.key)
		}
	}

	// MatchPath appends to the path given, allocating nothing when it has
	// room, and leaves it as it was when nothing matches.
	buf := make([]*Descriptor, 1, 8)
	entries := e("user", "user/alice", "resource", "res/file1", "action", "read")
	if n := testing.AllocsPerRun(100, func() { c.MatchPath("test-domain", entries, buf) }); n != 0 {
		t.Errorf("MatchPath allocates %v times", n)
	}
	if r, path := c.MatchPath("test-domain", entries, buf); r == nil || len(path) != 4 || path[0] != nil || path[3].Key != "action" {
		t.Errorf("MatchPath: %v %v", r, path)
	}
	if r, path := c.MatchPath("test-domain", e("user", "user/alice", "resource", "other"), buf); r != nil || len(path) != 1 {
		t.Errorf("no match: %v %v", r, path)
	}
}
