package rulecheck

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeFiles writes name → contents under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs Main with args and returns its exit code, stdout and stderr.
func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

const apiRules = `domain: api
algorithm: token_bucket
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: second, requests_per_unit: 20, burst: 40}
  - key: api_key
    value: partner
    rate_limit:
      name: partner
      unit: second
      requests_per_unit: 200
      replaces: [{name: per_key}]
  - key: remote_address
    value: 192.0.2.66
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: remote_address
    value: 127.0.0.1
    rate_limit: {unlimited: true}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: path
        value: /export*
        detailed_metric: true
        rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_log, failure_policy: fail_closed}
      - key: "user agent"
        value: "a=b\tc"
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 60, algorithm: fixed_window}
`

// TestText checks the whole text output for rules of every kind: the tree
// indented by depth, each column, quoted keys and values, and a stable
// order (domains by name, descriptors in file order), which a CI step may
// diff.
func TestText(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"web.yml":   "domain: web\ndescriptors:\n  - key: path\n    value: /login\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"api.yaml":  apiRules,
		"empty.yml": "domain: empty\n",
		"notes.txt": "not a rule file",
	})
	code, out, errOut := run("--config", dir)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := strings.ReplaceAll(`domain api (DIR/api.yaml): 6 rules
  DESCRIPTOR                 LINE  LIMIT                 ALGORITHM     FAILURE      NOTES
  api_key                    4     20/second burst 40    token_bucket  local        name=per_key
  api_key=partner            6     200/second burst 200  token_bucket  local        name=partner replaces=per_key
  remote_address=192.0.2.66  13    deny all              -             -
  remote_address=127.0.0.1   16    unlimited             -             -
  tenant                     19    -                     -             -            value_to_metric
    path=/export*            22    5/hour                sliding_log   fail_closed  detailed_metric
    "user agent"="a=b\tc"    26    60/minute             fixed_window  local        shadow
domain empty (DIR/empty.yml): 0 rules
  no descriptors
domain web (DIR/web.yml): 1 rule
  DESCRIPTOR   LINE  LIMIT     ALGORITHM       FAILURE  NOTES
  path=/login  3     5/minute  sliding_window  local    shadow
ok: 3 files, 3 domains, 7 rules
`, "DIR", dir)
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// TestProblems checks that every bad file of a directory is reported, each
// problem once with its file and line, grouped by file in name order, and
// that the good files are not named.
func TestProblems(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a_big.yaml":  "domain: big\n" + strings.Repeat("#", 500),
		"b_bad.yaml":  "domain: bad\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
		"c_good.yaml": "domain: good\n",
		"d_dup.yaml":  "domain: good\n",
	})
	if err := os.Symlink("nowhere", filepath.Join(dir, "e_link.yaml")); err != nil {
		t.Fatal(err)
	}
	r := Check(t.Context(), Options{Path: dir, MaxFileBytes: 400})
	if r.OK || len(r.Rules) != 0 || len(r.Files) != 0 {
		t.Fatalf("OK %v, %d rules, files %v: want a failed check", r.OK, len(r.Rules), r.Files)
	}
	type want struct {
		file, text string
		line       int
	}
	wants := []want{
		{"a_big.yaml", "above the cap of 400 bytes", 0},
		{"b_bad.yaml", `descriptors[0].rate_limit.unit: unknown unit "fortnight"`, 4},
		{"b_bad.yaml", "descriptors[1].rate_limit.requests_per_unit: -1 is negative", 6},
		{"d_dup.yaml", `domain "good" is already defined in ` + filepath.Join(dir, "c_good.yaml"), 0},
		{"e_link.yaml", "stat: no such file or directory", 0},
	}
	if len(r.Problems) != len(wants) {
		t.Fatalf("got %d problems, want %d: %+v", len(r.Problems), len(wants), r.Problems)
	}
	for i, w := range wants {
		p := r.Problems[i]
		file := filepath.Join(dir, w.file)
		if p.File != file || p.Line != w.line || !strings.Contains(p.Error, w.text) {
			t.Errorf("problem %d: got %+v, want %s line %d with %q", i, p, file, w.line, w.text)
		}
		prefix := file + ":"
		if w.line > 0 {
			prefix = file + ":" + strconv.Itoa(w.line) + ": "
		}
		if !strings.HasPrefix(p.Error, prefix) {
			t.Errorf("problem %d: %q does not start with %q", i, p.Error, prefix)
		}
	}

	var out, errOut bytes.Buffer
	if err := r.WriteText(&out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if out.Len() != 0 || len(lines) != len(wants)+1 ||
		lines[len(lines)-1] != "redlimit check: 5 problems in 4 files: serve would refuse these rules" {
		t.Errorf("stdout %q, stderr:\n%s", out.String(), errOut.String())
	}
}

// TestJSON checks the JSON report of a good and of a bad configuration:
// the rules in the form of GET /rules, the problems with file and line,
// and the exit codes.
func TestJSON(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"api.yaml": apiRules})
	code, out, errOut := run("--config", dir, "--format=json")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var good struct {
		OK       bool
		Files    []string
		Domains  []string
		Rules    []map[string]any
		Problems []Problem
	}
	if err := json.Unmarshal([]byte(out), &good); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !good.OK || len(good.Files) != 1 || len(good.Domains) != 1 || len(good.Rules) != 6 || good.Problems == nil || len(good.Problems) != 0 {
		t.Fatalf("got %+v", good)
	}
	if r := good.Rules[1]; r["path"] != "api.api_key_partner" || r["burst"] != 200.0 || r["replaces"].([]any)[0] != "per_key" ||
		r["algorithm"] != "token_bucket" || r["line"] != 6.0 {
		t.Errorf("rule 1: %v", r)
	}
	if r := good.Rules[2]; r["deny_all"] != true {
		t.Errorf("rule 2: %v", r)
	}

	writeFiles(t, dir, map[string]string{"bad.yaml": "domain: bad\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"})
	code, out, errOut = run("--config", dir, "--format", "json")
	if code != ExitInvalid || errOut != "" {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var bad struct {
		OK       bool
		Rules    []map[string]any
		Problems []Problem
	}
	if err := json.Unmarshal([]byte(out), &bad); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if bad.OK || bad.Rules == nil || len(bad.Rules) != 0 || len(bad.Problems) != 1 {
		t.Fatalf("got %+v", bad)
	}
	if p := bad.Problems[0]; p.File != filepath.Join(dir, "bad.yaml") || p.Line != 4 || p.Field != "descriptors[0].rate_limit.unit" {
		t.Errorf("got %+v", p)
	}
}

// TestPaths checks a single file, an empty directory (valid, with a
// warning: serve would allow everything) and a path that does not exist.
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.txt") // a file named as the path loads whatever its name
	writeFiles(t, dir, map[string]string{"rules.txt": "domain: one\n"})
	if code, out, errOut := run("--config=" + file); code != ExitOK || errOut != "" ||
		!strings.HasSuffix(out, "ok: 1 file, 1 domain, 0 rules\n") {
		t.Errorf("one file: exit %d\n%s%s", code, out, errOut)
	}
	empty := t.TempDir()
	if code, out, errOut := run("--config=" + empty); code != ExitOK || out != "ok: 0 files, 0 domains, 0 rules\n" ||
		!strings.Contains(errOut, "warning: no rule files in "+empty) {
		t.Errorf("empty directory: exit %d\n%s%s", code, out, errOut)
	}
	missing := filepath.Join(dir, "missing")
	if code, out, errOut := run("--config=" + missing); code != ExitInvalid || out != "" ||
		!strings.HasPrefix(errOut, missing+": stat: no such file or directory\n") ||
		!strings.Contains(errOut, "1 problem in 1 file") {
		t.Errorf("missing: exit %d\n%s%s", code, out, errOut)
	}
}

// TestUsage checks the usage errors (exit 2, nothing on stdout) and --help.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--config=x", "--format=yaml"},
		{"--config", "x", "extra"},
		{"--no-such-flag"},
		{"--max-config-bytes=lots", "--config=x"},
	} {
		if code, out, errOut := run(args...); code != ExitUsage || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, _ := run("--help")
	if code != ExitOK || !strings.Contains(out, "Usage: redlimit check --config PATH") || !strings.Contains(out, "-max-config-file-bytes") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
}

func TestShow(t *testing.T) {
	for in, want := range map[string]string{
		"remote_address": "remote_address",
		"/api/*":         "/api/*",
		"":               `""`,
		"a b":            `"a b"`,
		"a=b":            `"a=b"`,
		"tab\there":      `"tab\there"`,
		"new\nline":      `"new\nline"`,
		`q"uote`:         `"q\"uote"`,
		"é":              "é",
		"\u200b":         `"\u200b"`,
	} {
		if got := show(in); got != want {
			t.Errorf("show(%q) = %s, want %s", in, got, want)
		}
	}
}
