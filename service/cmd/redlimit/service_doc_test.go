package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestServiceDocFlags checks that docs/SERVICE.md's flag table names
// every flag of redlimit serve with its environment variable, and no
// other: the table and --help agree both ways.
func TestServiceDocFlags(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "SERVICE.md"))
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if code := run([]string{"serve", "--help"}, &help, &help); code != 0 {
		t.Fatalf("serve --help: exit %d\n%s", code, help.String())
	}
	pairs := func(re string, text []byte) []string {
		var out []string
		for _, m := range regexp.MustCompile(re).FindAllSubmatch(text, -1) {
			out = append(out, "--"+string(m[1])+" "+string(m[2]))
		}
		slices.Sort(out)
		return out
	}
	inHelp := pairs(`(?m)^  --([a-z][a-z0-9-]*)\b.*\(env ([A-Z0-9_]+)\)`, help.Bytes())
	inDoc := pairs("(?m)^\\| `--([a-z][a-z0-9-]*)` \\| `([A-Z0-9_]+)` \\|", data)
	if len(inHelp) < 30 {
		t.Fatalf("only %d flags found in serve --help:\n%s", len(inHelp), help.String())
	}
	for _, p := range inHelp {
		if !slices.Contains(inDoc, p) {
			t.Errorf("docs/SERVICE.md's table lacks %s", p)
		}
	}
	for _, p := range inDoc {
		if !slices.Contains(inHelp, p) {
			t.Errorf("docs/SERVICE.md's table has %s, which serve --help does not list", p)
		}
	}
	if len(slices.Compact(slices.Clone(inDoc))) != len(inDoc) {
		t.Errorf("docs/SERVICE.md's table lists a flag twice")
	}
}
