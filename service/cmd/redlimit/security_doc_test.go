package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityDocNames checks that docs/SECURITY.md names only flags that
// redlimit serve has, environment variables it reads and metrics the
// service exports, so that its advice cannot drift from the command.
func TestSecurityDocNames(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	var help bytes.Buffer
	if code := run([]string{"serve", "--help"}, &help, &help); code != 0 {
		t.Fatalf("serve --help: exit %d\n%s", code, help.String())
	}

	flags := regexp.MustCompile("`--([a-z][a-z0-9-]*)").FindAllStringSubmatch(doc, -1)
	if len(flags) < 15 {
		t.Fatalf("only %d flags named in SECURITY.md", len(flags))
	}
	for _, m := range flags {
		if !regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(m[1]) + `(\s|$)`).MatchString(help.String()) {
			t.Errorf("SECURITY.md names --%s, which redlimit serve does not have", m[1])
		}
	}
	for _, env := range regexp.MustCompile(`REDLIMIT_[A-Z_]+`).FindAllString(doc, -1) {
		if !strings.Contains(help.String(), "(env "+env+")") {
			t.Errorf("SECURITY.md names %s, which redlimit serve does not read", env)
		}
	}

	// The metric names the service registers, from its source.
	sources, err := filepath.Glob(filepath.Join("..", "..", "internal", "server", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	registered := regexp.MustCompile(`Name: +"(redlimit_[a-z_]+)"`)
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registered.FindAllStringSubmatch(string(src), -1) {
			exported[m[1]] = true
		}
	}
	if len(exported) < 10 {
		t.Fatalf("only %d metrics found in internal/server", len(exported))
	}
	for _, name := range regexp.MustCompile(`redlimit_[a-z_]+`).FindAllString(doc, -1) {
		if !exported[name] {
			t.Errorf("SECURITY.md names %s, which the service does not export", name)
		}
	}

	// The tests, fuzz targets and benchmarks it cites, from both modules'
	// test files.
	defined := map[string]bool{}
	declared := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
	err = filepath.WalkDir(filepath.Join("..", "..", ".."), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range declared.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`).FindAllString(doc, -1)
	if len(cited) < 10 {
		t.Fatalf("only %d tests cited in SECURITY.md", len(cited))
	}
	for _, name := range cited {
		if !defined[name] {
			t.Errorf("SECURITY.md cites %s, which no test file defines", name)
		}
	}
}
