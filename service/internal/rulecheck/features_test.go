package rulecheck

import (
	"strings"
	"testing"
)

// TestTextEnvoyFeatures checks the rows of quota_mode, metadata,
// share_threshold, value_to_metric, unit_multiplier and counting, and a
// domain merged from two files with --merge-domains, which without the
// flag is refused.
func TestTextEnvoyFeatures(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": `domain: llm
counting: debit
descriptors:
  - key: backend
    value: gpu_east
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {upstream: {name: gpu_east, weight: 2}}
  - key: object
    value: docs/*
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 4, counting: admission}
`,
		"b.yaml": `domain: llm
descriptors:
  - key: user
    rate_limit: {unit: hour, unit_multiplier: 6, requests_per_unit: 100000}
`,
	})
	if code, _, errOut := run("--config", dir); code != ExitInvalid || !strings.Contains(errOut, `domain "llm" is already defined in `+dir+"/a.yaml") {
		t.Fatalf("without --merge-domains: exit %d, stderr:\n%s", code, errOut)
	}
	code, out, errOut := run("--config", dir, "--merge-domains")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := strings.ReplaceAll(`domain llm (DIR/a.yaml, DIR/b.yaml): 3 rules
  DESCRIPTOR        LINE      LIMIT           ALGORITHM       FAILURE  NOTES
  backend=gpu_east  a.yaml:4  1/minute        sliding_window  local    quota counting=debit metadata={"upstream":{"name":"gpu_east","weight":2}}
  object=docs/*     a.yaml:9  4/30 seconds    sliding_window  local    value_to_metric share_threshold counting=admission
  user              b.yaml:3  100000/6 hours  sliding_window  local
ok: 2 files, 1 domain, 3 rules
`, "DIR", dir)
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}

	code, out, _ = run("--config", dir, "--merge-domains", "--format", "json")
	for _, want := range []string{`"quota_mode": true`, `"counting": "debit"`, `"unit_multiplier": 30`, `"period": "30s"`,
		`"metadata": {`, `"name": "gpu_east"`, `"period": "6h0m0s"`} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("JSON (exit %d) does not hold %s:\n%s", code, want, out)
		}
	}
}
