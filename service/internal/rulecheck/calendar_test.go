package rulecheck

import (
	"strings"
	"testing"
)

// TestTextCalendar shows calendar rules (time_zone) in the table and in
// JSON, and refuses a calendar on another algorithm or an unknown zone.
func TestTextCalendar(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": `domain: billing
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 1000, time_zone: Europe/Berlin}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 50, time_zone: UTC, algorithm: fixed_window}
`})
	code, out, errOut := run("--config", dir)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"1000/calendar month Europe/Berlin  fixed_window", "50/calendar day UTC"} {
		if !strings.Contains(out, want) {
			t.Errorf("table does not hold %q:\n%s", want, out)
		}
	}
	code, out, _ = run("--config", dir, "--format", "json")
	for _, want := range []string{`"time_zone": "Europe/Berlin"`, `"time_zone": "UTC"`, `"algorithm": "fixed_window"`} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("JSON (exit %d) does not hold %s:\n%s", code, want, out)
		}
	}

	for _, tc := range []struct{ rule, want string }{
		{`{unit: month, requests_per_unit: 10, time_zone: Europe/Atlantis}`, `unknown time zone: "Europe/Atlantis"`},
		{`{unit: month, requests_per_unit: 10, time_zone: UTC, algorithm: token_bucket}`, "token_bucket cannot count calendar periods"},
		{`{unit: hour, requests_per_unit: 10, time_zone: UTC}`, "needs unit day, week, month or year, not hour"},
		{`{unit: day, unit_multiplier: 2, requests_per_unit: 10, time_zone: UTC}`, "takes no unit_multiplier"},
		{`{unlimited: true, time_zone: UTC}`, "an unlimited rule takes no time_zone"},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + tc.rule + "\n"})
		code, _, errOut := run("--config", dir)
		if code != ExitInvalid || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "a.yaml:4") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant %q at a.yaml:4", tc.rule, code, errOut, tc.want)
		}
	}
}
