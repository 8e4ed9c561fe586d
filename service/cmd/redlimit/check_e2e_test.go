package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCheck runs `redlimit check args` and returns its exit code, stdout and
// stderr. It fails the test if the command does not end within 20 s.
func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"check"}, args...)...)
	cmd.Env = cleanEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("redlimit check %q did not end in 20 s", args)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// TestCheckGood checks `redlimit check` on good rule files: exit 0, the
// rule tree on stdout, nothing on stderr; and that what it prints in JSON
// is what `redlimit serve` serves on GET /rules for the same files.
func TestCheckGood(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCheck(t, "--config", "testdata/check/good")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, want := range []string{
		"domain api (testdata/check/good/api.yaml): 6 rules\n",
		"\n  api_key=partner            13    200/second burst 200  token_bucket  fail_open    name=partner replaces=per_key\n",
		"\n  remote_address=192.0.2.66  22    deny all              -             -\n",
		"\n  remote_address=127.0.0.1   28    unlimited             -             -\n",
		"\n    path=/export*            36    5/hour                sliding_log   fail_closed  detailed_metric\n",
		"\n    \"user agent\"=\"curl 8\"    44    60/minute             fixed_window  fail_open    shadow\n",
		"domain web (testdata/check/good/web.yml): 1 rule\n",
		"\n  path=/login  3     5/minute  sliding_window  local    shadow\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "\nok: 2 files, 2 domains, 7 rules\n") {
		t.Errorf("no summary at the end:\n%s", out)
	}

	code, out, errOut = runCheck(t, "--config=testdata/check/good", "--format=json")
	if code != 0 || errOut != "" {
		t.Fatalf("json: exit %d, stderr:\n%s", code, errOut)
	}
	var report struct {
		OK    bool
		Rules json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || !report.OK {
		t.Fatalf("json: %v:\n%s", err, out)
	}
	p := startProc(t, nil, "--config=testdata/check/good")
	status, body := p.get("/rules")
	var served struct{ Rules json.RawMessage }
	if err := json.Unmarshal([]byte(body), &served); status != 200 || err != nil {
		t.Fatalf("GET /rules: %d %v:\n%s", status, err, body)
	}
	if a, b := compactJSON(t, report.Rules), compactJSON(t, served.Rules); a != b {
		t.Errorf("check's rules differ from serve's:\ncheck: %s\nserve: %s", a, b)
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestCheckBroken checks `redlimit check` on a directory of broken files:
// exit 1, every problem of every bad file on stderr as file:line, the good
// file not named, nothing on stdout; the same problems in JSON; and that
// `redlimit serve` refuses the same files for the same reasons.
func TestCheckBroken(t *testing.T) {
	t.Parallel()
	const dir = "testdata/check/broken/"
	want := []string{
		dir + `a_syntax.yaml:3: invalid YAML: did not find expected ',' or '}'`,
		dir + `b_values.yaml:5: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month, year)`,
		dir + `b_values.yaml:10: descriptors[1].rate_limit.requests_per_unit: -1 is negative (want 0 to 4294967295)`,
		dir + `d_same_domain.yaml: domain: domain "shared" is already defined in ` + dir + `c_good.yaml (one file per domain, unless merged: --merge-domains, as envoy's MERGE_DOMAIN_CONFIG)`,
		`redlimit check: 4 problems in 3 files: serve would refuse these rules`,
	}
	code, out, errOut := runCheck(t, "--config", dir)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
	if got := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, strings.Join(want, "\n"))
	}

	code, out, _ = runCheck(t, "--config", dir, "--format=json")
	var report struct {
		OK       bool
		Problems []struct {
			File  string
			Line  int
			Error string
		}
	}
	if err := json.Unmarshal([]byte(out), &report); code != 1 || err != nil || report.OK || len(report.Problems) != 4 {
		t.Fatalf("json: exit %d, %v:\n%s", code, err, out)
	}
	for i, p := range report.Problems {
		if p.Error != want[i] || !strings.HasPrefix(p.Error, p.File) {
			t.Errorf("json problem %d: %+v, want %s", i, p, want[i])
		}
	}
	if p := report.Problems[1]; p.File != dir+"b_values.yaml" || p.Line != 5 {
		t.Errorf("json problem 1: %+v", p)
	}

	// serve refuses the same files, naming the same places.
	srv := tryStartProc(t, nil, "--config="+dir)
	srv.wait(20 * time.Second)
	if srv.cmd.ProcessState == nil || srv.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("serve: %v, want exit 1", srv.exitErr)
	}
	logs := srv.logs.String()
	for _, w := range []string{"a_syntax.yaml:3: invalid YAML", "b_values.yaml:5: descriptors[0].rate_limit.unit",
		"b_values.yaml:10: descriptors[1].rate_limit.requests_per_unit", "d_same_domain.yaml: domain: domain"} {
		if !strings.Contains(logs, w) {
			t.Errorf("serve's logs do not say %q:\n%s", w, logs)
		}
	}
}

// TestCheckCapsAndLayout checks that check takes serve's caps, with serve's
// flags, and loads a ConfigMap volume's layout (dotted directories and
// symbolic links) as serve does; and its usage errors.
func TestCheckCapsAndLayout(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCheck(t, "--config=testdata/check/good", "--max-config-file-bytes=200")
	if code != 1 || !strings.HasPrefix(errOut, "testdata/check/good/api.yaml: ") ||
		!strings.Contains(errOut, "above the cap of 200 bytes for one file") || strings.Contains(errOut, "web.yml") {
		t.Errorf("file cap: exit %d:\n%s", code, errOut)
	}
	code, _, errOut = runCheck(t, "--config=testdata/check/good", "--max-config-bytes=1000")
	if code != 1 || !strings.Contains(errOut, "the rule files hold more than 1000 bytes") {
		t.Errorf("total cap: exit %d:\n%s", code, errOut)
	}

	dir := t.TempDir()
	data, err := os.ReadFile("testdata/check/good/web.yml")
	if err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(version, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(version, "web.yml"), string(data))
	for link, target := range map[string]string{"..data": filepath.Base(version), "web.yml": "..data/web.yml"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCheck(t, "--config", dir)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "domain web ("+filepath.Join(dir, "web.yml")+"): 1 rule\n") ||
		!strings.HasSuffix(out, "ok: 1 file, 1 domain, 1 rule\n") {
		t.Errorf("ConfigMap layout: exit %d:\n%s%s", code, out, errOut)
	}

	for _, args := range [][]string{nil, {"--config=x", "--format=xml"}, {"--bogus"}} {
		if code, out, errOut := runCheck(t, args...); code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
