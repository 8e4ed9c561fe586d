package sim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMainStraddle(t *testing.T) {
	t.Parallel()
	svg := filepath.Join(t.TempDir(), "out.svg")
	code, out, errOut := runMain("--pattern", "straddle", "--limit", "100", "--period", "1m", "--svg", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"ALGORITHM       ADMITTED  DENIED  MAX IN 1m  OVER LIMIT     BUSIEST 1m FROM\n",
		"fixed_window    200       0       200        +100 (100.0%)  54s\n",
		"sliding_log     100       100     100        0              54s\n",
		"sliding_window vs the exact sliding_log: +9 admitted, +9 in the busiest 1m, 9 of 200 decisions differ\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	doc, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if _, texts := svgTexts(t, doc); count(texts, "fixed_window") != 1 {
		t.Errorf("chart legend: %q", texts)
	}
	if !strings.Contains(errOut, "wrote "+svg) {
		t.Errorf("stderr %q", errOut)
	}
}

func TestMainJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMain("--pattern", "poisson", "--rate", "5", "--duration", "10m", "--seed", "3", "--limit", "10", "--period", "1s", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Pattern    string            `json:"pattern"`
		Algorithms []json.RawMessage `json:"algorithms"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.Pattern != "poisson 5/s for 10m (seed 3)" || len(r.Algorithms) != 4 {
		t.Errorf("pattern %q, %d algorithms", r.Pattern, len(r.Algorithms))
	}
}

func TestMainCSV(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(good, []byte("timestamp\n0\n0.1\n0.2\n0.3\n"), 0o644)
	os.WriteFile(bad, []byte("timestamp\n0\n0.1\nsoon\n"), 0o644)

	code, out, errOut := runMain("--csv", good, "--limit", "2", "--period", "1s", "--algorithms", "sliding_log")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "good.csv (4 requests)") || !strings.Contains(out, "sliding_log  2         2       2") {
		t.Errorf("output:\n%s", out)
	}

	code, _, errOut = runMain("--csv", bad)
	if code != 2 || !strings.Contains(errOut, bad+`:4: "soon": not a number of seconds`) {
		t.Errorf("bad file: exit %d, %s", code, errOut)
	}
}

func TestMainHelp(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMain("-h")
	if code != 0 || errOut != "" || strings.Count(out, "Usage: redlimit simulate") != 1 {
		t.Errorf("-h: exit %d, stderr %q, %d usages on stdout", code, errOut, strings.Count(out, "Usage:"))
	}
	for _, flag := range []string{"-pattern", "-limit", "-period", "-burst", "-rate", "-duration", "-size", "-every", "-seed", "-csv", "-svg", "-json", "-algorithms", "straddle", "poisson", "RFC 3339", "Examples:"} {
		if !strings.Contains(out, flag) {
			t.Errorf("help lacks %q", flag)
		}
	}
}

func TestMainErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--pattern", "zigzag"}, 2, `--pattern "zigzag"`},
		{[]string{"--pattern", "straddle", "--rate", "3"}, 2, "--rate does not apply to --pattern straddle"},
		{[]string{"--pattern", "steady", "--seed", "3"}, 2, "--seed does not apply to --pattern steady"},
		{[]string{"--pattern", "csv"}, 2, "needs --csv file"},
		{[]string{"--csv", filepath.Join(t.TempDir(), "missing.csv")}, 2, "missing.csv"},
		{[]string{"--limit", "0"}, 2, "--limit 0"},
		{[]string{"--period", "0s"}, 2, "--period 0s"},
		{[]string{"--pattern", "steady", "--rate", "-1"}, 2, "rate -1"},
		{[]string{"--algorithms", "fixed_window,leaky"}, 2, "unknown algorithm"},
		{[]string{"--json", "--svg", "-"}, 2, "give --svg a file"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--svg", filepath.Join(t.TempDir(), "no", "such", "dir.svg")}, 1, "dir.svg"},
		{[]string{"--limit", "200000"}, 1, "sliding_log"},
	} {
		code, _, errOut := runMain(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%q: exit %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

func TestMainSVGToStdout(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMain("--svg", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if root, _ := svgTexts(t, []byte(out)); root != "svg" {
		t.Errorf("stdout is not the chart alone")
	}
}
