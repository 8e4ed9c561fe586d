//go:build ignore

// Comments measures the comments of Go packages and Lua scripts.
// For each package it prints the number of comment sentences, their mean
// length in words, the longest sentence, and the comment lines citing
// figures. It reads non-test .go files and .lua files.
// It skips testdata, vendor, and nested modules (directories with a go.mod).
//
// Usage: go run scripts/comments.go [-long n] [dir...]   (default: the current directory)
//
// With -long n, it also lists the sentences over n words.
//
// A sentence ends at '.', '!' or '?' before a space, at a blank comment
// line, and at the end of a comment group or a list item. Code blocks
// (indented lines that are not list items), headings and directives are
// not prose: they are skipped. Quoted text ("100/min") is an API value,
// not a figure.
//
// A figure is a measurement. It may be a per-op benchmark unit ("ns/op"),
// or a timing with decimals ("3.5 µs"). It may count allocations, or bytes
// per item. It may be a gain in percent or times, a before-and-after pair
// ("6 → 3"), or a throughput ("ops/s"). Units of an API are not figures:
// µs in a wire format, 10% of jitter, 5 requests a second.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// figure matches a comment line that cites a measurement.
var figure = regexp.MustCompile(`(?i)` + strings.Join([]string{
	`\b(ns|µs|us|ms|B|allocs)/op\b`,
	`\d+\.\d+\s*(ns|µs|us|ms)\b`,
	`\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|\d+-byte)\s+(\w+\s+)?(allocations?|allocs?)\b`,
	`\d+\s+bytes\s+(of\s+\w+\s+)?(per|each|an?)\b`,
	`\b(about|some|roughly)\s+\d[\d,.]*\s*(bytes|B|KB|MB|KiB|MiB|ns|µs|us)\b`,
	`\d+(\.\d+)?\s*%\s+(faster|slower|more|less|fewer|cheaper|better|worse)\b`,
	`\b(by|saves?|costs?|cuts?|gains?)\s+(about\s+|some\s+)?\d+(\.\d+)?\s*%`,
	`\d+(\.\d+)?\s*[x×]\s*(faster|slower|more|less|fewer|cheaper)\b`,
	`\d+(\.\d+)?\s*\S*\s*(→|->)\s*\d+(\.\d+)?`,
	`\d[\d,.]*\s*[kM]?\s*(ops|reqs?|decisions|calls|rps|qps)/s\b`,
}, "|"))

var (
	quoted   = regexp.MustCompile("\"[^\"]*\"|`[^`]*`")
	sentEnd  = regexp.MustCompile(`[.!?]["')\]]*\s+`)
	listItem = regexp.MustCompile(`^\s+([-*+•]|\d+[.)])\s`)
	abbrev   = regexp.MustCompile(`(?i)\b(e\.g|i\.e|etc|vs|cf|approx)\.$`)
)

type sentence struct {
	pos   string
	words int
	text  string
}

var long = flag.Int("long", 0, "list the sentences over `n` words")

type pkg struct {
	sentences []sentence
	words     int
	longest   sentence
	figures   []string
}

func main() {
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	pkgs := map[string]*pkg{}
	for _, root := range dirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				name := d.Name()
				if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
					return filepath.SkipDir
				}
				if path != root {
					if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
						return filepath.SkipDir
					}
				}
				return nil
			}
			dir := filepath.Dir(path)
			switch {
			case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
				return goFile(pkgOf(pkgs, dir), path)
			case strings.HasSuffix(path, ".lua"):
				return luaFile(pkgOf(pkgs, dir+" (lua)"), path)
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	report(pkgs)
}

func pkgOf(pkgs map[string]*pkg, name string) *pkg {
	if pkgs[name] == nil {
		pkgs[name] = &pkg{}
	}
	return pkgs[name]
}

// goFile adds the comment groups of the Go file at path to p.
func goFile(p *pkg, path string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	for _, g := range f.Comments {
		p.group(path, goLines(fset, g))
	}
	return nil
}

// goLines returns the lines of g without their comment markers.
func goLines(fset *token.FileSet, g *ast.CommentGroup) []line {
	var lines []line
	for _, c := range g.List {
		n := fset.Position(c.Slash).Line
		text := c.Text
		if strings.HasPrefix(text, "/*") {
			for i, l := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "/*"), "*/"), "\n") {
				lines = append(lines, line{n + i, l})
			}
			continue
		}
		text = strings.TrimPrefix(text, "//")
		if isDirective(text) {
			continue
		}
		lines = append(lines, line{n, strings.TrimPrefix(text, " ")})
	}
	return lines
}

// luaFile adds the comments of the Lua file at path to p: a run of
// lines that start with "--" is one group.
func luaFile(p *pkg, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var lines []line
	for i, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "--") {
			// A comment at the end of a code line is a group of its own.
			if j := strings.Index(l, "--"); j > 0 && !strings.ContainsAny(l[:j], `"'`) {
				p.group(path, []line{{i + 1, strings.TrimPrefix(l[j+2:], " ")}})
			}
			p.group(path, lines)
			lines = nil
			continue
		}
		lines = append(lines, line{i + 1, strings.TrimPrefix(strings.TrimPrefix(t, "--"), " ")})
	}
	p.group(path, lines)
	return nil
}

func isDirective(text string) bool {
	return strings.HasPrefix(text, "go:") || strings.HasPrefix(text, "line ") ||
		strings.HasPrefix(text, "nolint") || strings.HasPrefix(text, "export ") ||
		strings.HasPrefix(text, "extern ")
}

type line struct {
	n    int
	text string
}

// group splits the lines of one comment into sentences and counts
// the lines that cite figures.
func (p *pkg) group(path string, lines []line) {
	var buf []string
	start := 0
	flush := func() {
		text := strings.Join(buf, " ")
		buf = nil
		for text != "" {
			end := len(text)
			rest := ""
			for _, m := range sentEnd.FindAllStringIndex(text, -1) {
				if abbrev.MatchString(strings.TrimRight(text[:m[0]+1], `"')]`)) {
					continue
				}
				end, rest = m[1], text[m[1]:]
				break
			}
			if w := words(text[:end]); w > 0 {
				s := sentence{fmt.Sprintf("%s:%d", path, start), w, text[:end]}
				p.sentences = append(p.sentences, s)
				p.words += w
				if w > p.longest.words {
					p.longest = s
				}
			}
			text = strings.TrimSpace(rest)
		}
	}
	for _, l := range lines {
		t := l.text
		switch {
		case strings.TrimSpace(t) == "":
			flush()
			continue
		case listItem.MatchString(t):
			flush()
			t = listItem.ReplaceAllString(t, "")
		case strings.HasPrefix(t, "\t") || strings.HasPrefix(t, "  "):
			if len(buf) > 0 && strings.HasPrefix(t, "  ") && !strings.HasPrefix(t, "\t") {
				break // a list item's continuation line
			}
			flush()
			continue // code block
		case strings.HasPrefix(t, "# "):
			flush()
			continue
		}
		if len(buf) == 0 {
			start = l.n
		}
		buf = append(buf, strings.TrimSpace(t))
		if figure.MatchString(quoted.ReplaceAllString(t, `""`)) {
			p.figures = append(p.figures, fmt.Sprintf("%s:%d: %s", path, l.n, strings.TrimSpace(t)))
		}
	}
	flush()
}

// words counts the words of s: its fields with a letter or digit.
func words(s string) int {
	n := 0
	for _, f := range strings.Fields(s) {
		if strings.IndexFunc(f, func(r rune) bool {
			return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
		}) >= 0 {
			n++
		}
	}
	return n
}

func report(pkgs map[string]*pkg) {
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Printf("%-40s %9s %6s %7s %s\n", "package", "sentences", "mean", "figures", "longest")
	var all pkg
	for _, name := range names {
		p := pkgs[name]
		if len(p.sentences) == 0 {
			continue
		}
		fmt.Printf("%-40s %9d %6.1f %7d %d words at %s\n", name, len(p.sentences),
			float64(p.words)/float64(len(p.sentences)), len(p.figures), p.longest.words, p.longest.pos)
		all.sentences = append(all.sentences, p.sentences...)
		all.words += p.words
		all.figures = append(all.figures, p.figures...)
		if p.longest.words > all.longest.words {
			all.longest = p.longest
		}
	}
	if len(all.sentences) > 0 {
		fmt.Printf("%-40s %9d %6.1f %7d %d words at %s\n", "total", len(all.sentences),
			float64(all.words)/float64(len(all.sentences)), len(all.figures), all.longest.words, all.longest.pos)
	}
	if *long > 0 {
		fmt.Printf("\nsentences over %d words:\n", *long)
		for _, s := range all.sentences {
			if s.words > *long {
				fmt.Printf("  %s (%d): %s\n", s.pos, s.words, s.text)
			}
		}
	}
	if len(all.figures) > 0 {
		fmt.Println("\nfigure lines:")
		for _, f := range all.figures {
			fmt.Println(" ", f)
		}
	}
}
