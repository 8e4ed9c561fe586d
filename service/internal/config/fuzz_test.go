package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Bounds of one Parse in FuzzParse: what the file holds (maxAllocPerByte,
// above the some 120 bytes per byte a dense flow list takes and the 290 of
// 9,000 nested brackets) plus what aliases may add (aliasAllowance nodes,
// some 400 bytes each), and a time far above what any input within these
// bounds takes, so that only runaway work fails it.
const (
	maxAllocPerByte = 512
	maxAllocFixed   = 32 << 20
	maxParseTime    = 5 * time.Second
)

// FuzzParse checks that Parse never panics, that what it rejects is an
// *Error wrapping ErrInvalid, and that what it accepts holds only valid
// limits and matches without panicking, the same with and without indexes.
// It also bounds each Parse's allocation by the input's size, and its time.
//
// probe is a request descriptor, "key=value" entries separated by ";".
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range append(files, more...) {
		if info, err := os.Stat(file); err != nil || info.IsDir() {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "remote_address=10.0.0.1")
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: a*b\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), "k=ab")
	f.Add([]byte("domain: d\ndescriptors: &x\n  - key: k\n    descriptors: *x\n"), "k=")
	f.Add([]byte("domain: d\n---\ndomain: e\n"), "")
	f.Add([]byte("{domain: d, descriptors: [{key: k, rate_limit: {<<: {unit: day}, requests_per_unit: 7}}]}"), "k=v;k=v")

	f.Add(mergeChain(maxMergeDepth+2), "k=v1")
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    descriptors: &a [{key: b}, {key: c}]\n  - {<<: *a, key: d}\n  - {<<: [*a, *a], key: e}\n"), "a=;b=")
	f.Add([]byte("domain: d\nx: "+strings.Repeat("[", 200)+strings.Repeat("]", 200)+"\n"), "")

	f.Fuzz(func(t *testing.T, data []byte, probe string) {
		var (
			d   *Domain
			err error
		)
		start := time.Now()
		n := allocated(func() { d, err = Parse("fuzz.yaml", data) })
		if took := time.Since(start); took > maxParseTime {
			t.Fatalf("Parse of %d bytes took %s", len(data), took)
		}
		if most := uint64(maxAllocFixed + maxAllocPerByte*len(data)); n > most {
			t.Fatalf("Parse of %d bytes allocated %d bytes, above %d", len(data), n, most)
		}
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error wrapping ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		c, err := New(d)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		names := map[string]bool{}
		for _, r := range d.Rules() {
			names[r.Name] = true
		}
		for _, r := range c.Rules() {
			if r.Unlimited {
				if r.Limit != (Rule{}).Limit {
					t.Fatalf("%s: unlimited with limit %+v", r.Path, r.Limit)
				}
			} else if r.DenyAll {
				if r.Limit.Count != 0 || r.Limit.Period <= 0 || !r.Limit.Algorithm.Valid() {
					t.Fatalf("%s: deny-all with limit %+v", r.Path, r.Limit)
				}
			} else if err := r.Limit.Validate(); err != nil {
				t.Fatalf("%s: invalid limit: %v", r.Path, err)
			}
			if !strings.HasPrefix(r.Path, d.Name+".") {
				t.Fatalf("path %q not under domain %q", r.Path, d.Name)
			}
			for _, n := range r.Replaces {
				if !names[n] {
					t.Fatalf("%s replaces undefined %q", r.Path, n)
				}
			}
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("json: %v", err)
		}

		// The probe matches alike whichever way levels are searched.
		var entries []Entry
		for _, kv := range strings.Split(probe, ";") {
			k, v, _ := strings.Cut(kv, "=")
			entries = append(entries, Entry{Key: k, Value: v})
		}
		want := c.Match(d.Name, entries)
		for _, m := range modes(c)[1:] {
			if got := m.c.Match(d.Name, entries); (got == nil) != (want == nil) || got != nil && got.Path != want.Path {
				t.Fatalf("%s: Match(%v) = %v, loaded config gives %v", m.name, entries, got, want)
			}
		}
		// MatchPath agrees, with a level per entry; the metric name starts
		// with the domain, and a shared level's key value is its pattern.
		r, path := c.MatchPath(d.Name, entries, nil)
		if r != want || r != nil && len(path) != len(entries) || r == nil && len(path) != 0 {
			t.Fatalf("MatchPath(%v) = %v %v, Match gives %v", entries, r, path, want)
		}
		if r != nil {
			if name := r.MetricName(entries, path); !strings.HasPrefix(name, d.Name+".") {
				t.Fatalf("metric name %q not under domain %q", name, d.Name)
			}
			for i, n := range path {
				if v := n.KeyValue(entries[i].Value); n.ShareThreshold && (v != n.Value || !matchWildcard(n.Value, entries[i].Value)) {
					t.Fatalf("level %d shares %q, keyed %q for %q", i, n.Value, v, entries[i].Value)
				}
			}
		}

		// A path of exact values selects its own descriptor.
		checkExactPaths(t, c, d.Name, nil, d.Descriptors)
	})
}

// checkExactPaths checks, for each descriptor reached by literal non-empty
// values only, that Match selects it.
func checkExactPaths(t *testing.T, c *Config, domain string, prefix []Entry, ds []*Descriptor) {
	for _, d := range ds {
		if d.Value == "" || isWildcard(d.Value) {
			continue
		}
		entries := append(prefix[:len(prefix):len(prefix)], Entry{Key: d.Key, Value: d.Value})
		if got := c.Match(domain, entries); got != d.Rule {
			t.Fatalf("Match(%v) = %v, want the rule of line %d, %v", entries, got, d.Line, d.Rule)
		}
		checkExactPaths(t, c, domain, entries, d.Descriptors)
	}
}

// FuzzMatchWildcard compares matchWildcard with a regular expression.
func FuzzMatchWildcard(f *testing.F) {
	f.Add("a*b*c", "axxbyyc")
	f.Add("*", "")
	f.Add("a*a", "a")
	f.Add("/api/*/resource/*/action", "/api/v1/resource/123/action")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return
		}
		if got, want := matchWildcard(pattern, s), wildcardRegexp(pattern).MatchString(s); got != want {
			t.Fatalf("matchWildcard(%q, %q) = %v, want %v", pattern, s, got, want)
		}
	})
}
