package redlimit_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeSnippet checks that the README's production snippet is the
// body of Example_production, so that the snippet compiles.
func TestReadmeSnippet(t *testing.T) {
	src, err := os.ReadFile("example_production_test.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nfunc Example_production\(\) \{\n(.*?)\n\}\n`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no Example_production in example_production_test.go")
	}
	var body []string
	for line := range strings.SplitSeq(string(m[1]), "\n") {
		body = append(body, strings.TrimPrefix(line, "\t"))
	}
	want := "```go\n" + strings.Join(body, "\n") + "\n```\n"
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not hold Example_production's body as a go block; want:\n%s", want)
	}
}
