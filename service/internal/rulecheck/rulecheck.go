// Package rulecheck is `redlimit check`. It loads rule files exactly as
// `redlimit serve` does: the same [config.Loader], with the same caps. It
// prints the rules they hold, or every problem of every bad file. A CI
// step runs it before the files ship.
//
//	redlimit check --config DIR [--format text|json]
//
// It exits 0 when the files load: serve would take them. It exits 1 when
// they do not. serve would refuse them at start, and on a reload keep the
// rules it has. It exits 2 on a usage error. With --format=text (the
// default) the rule tree goes to standard output. The problems go to
// standard error, one "file:line: field: message" a line. With
// --format=json a [Report] goes to standard output either way. Both are
// stable: domains in name order, rules in file order, problems by file,
// then line.
package rulecheck

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/redlimit/redlimit/service/internal/config"
)

// Exit codes of [Main].
const (
	ExitOK      = 0 // the rule files load
	ExitInvalid = 1 // they do not: a problem in a file, or one that cannot be read
	ExitUsage   = 2 // bad flags
)

// Options say what to check. The zero value of each cap is its default, as
// for [config.Loader].
type Options struct {
	// Path is a rule file, or a directory of *.yaml and *.yml rule files,
	// as serve's --config.
	Path string
	// MaxFileBytes and MaxTotalBytes are serve's --max-config-file-bytes
	// and --max-config-bytes.
	MaxFileBytes, MaxTotalBytes int64
	// MergeDomains is serve's --merge-domains: the files of one domain are
	// merged rather than refused.
	MergeDomains bool
}

// Report is what a check found. It marshals to the JSON that
// --format=json prints; Rules take the form GET /rules serves.
type Report struct {
	// OK reports whether the files load.
	OK bool `json:"ok"`
	// Path is Options.Path.
	Path string `json:"path"`
	// Files, Domains and Rules are what was loaded: empty unless OK.
	Files   []string       `json:"files"`
	Domains []string       `json:"domains"`
	Rules   []*config.Rule `json:"rules"`
	// Problems are every problem found, by file, then line: empty if OK.
	Problems []Problem `json:"problems"`

	cfg *config.Config // nil unless OK
}

// Problem is one problem of a rule file.
type Problem struct {
	// File is the file at fault, or "" when the problem is not a file's.
	File string `json:"file,omitempty"`
	// Line is the 1-based line, or 0 when the problem has none.
	Line int `json:"line,omitempty"`
	// Field is the path of the field at fault, such as
	// "descriptors[0].rate_limit.unit", or "".
	Field string `json:"field,omitempty"`
	// Error is the whole message: "file:line: field: message", as serve
	// logs it, or "file: op: error" for a file that cannot be read.
	Error string `json:"error"`
}

// Check loads opts.Path as serve would and reports what it holds.
func Check(ctx context.Context, opts Options) *Report {
	l := config.Loader{MaxFileBytes: opts.MaxFileBytes, MaxTotalBytes: opts.MaxTotalBytes, MergeDomains: opts.MergeDomains}
	cfg, err := l.Load(ctx, opts.Path)
	r := &Report{Path: opts.Path, Files: []string{}, Domains: []string{}, Rules: []*config.Rule{}, Problems: []Problem{}}
	if err != nil {
		r.Problems = problems(r.Problems, err)
		// By file; each file's in the order the loader gives (by line, a
		// note that parsing stopped last).
		slices.SortStableFunc(r.Problems, func(a, b Problem) int { return cmp.Compare(a.File, b.File) })
		return r
	}
	r.OK, r.cfg = true, cfg
	r.Files = append(r.Files, cfg.Files...)
	for name := range cfg.Domains {
		r.Domains = append(r.Domains, name)
	}
	slices.Sort(r.Domains)
	r.Rules = append(r.Rules, cfg.Rules()...)
	return r
}

// problems appends the problems err holds. Each [*config.Error] of a tree
// of joined errors is one. Any other error is one problem too. A file
// that cannot be read gives "file: op: error". A config.Error gives
// "file: message".
func problems(ps []Problem, err error) []Problem {
	if e, ok := err.(*config.Error); ok {
		return append(ps, Problem{File: e.File, Line: e.Line, Field: e.Field, Error: e.Error()})
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			ps = problems(ps, e)
		}
		return ps
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return append(ps, Problem{File: pe.Path, Error: fmt.Sprintf("%s: %s: %v", pe.Path, pe.Op, pe.Err)})
	}
	return append(ps, Problem{Error: err.Error()})
}

// Main runs `redlimit check` with args and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	var (
		opts   Options
		format string
	)
	fs := flag.NewFlagSet("redlimit check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Path, "config", "", "rule `path`: a YAML file, or a directory of *.yaml and *.yml files (one domain each), as serve's --config")
	fs.Int64Var(&opts.MaxFileBytes, "max-config-file-bytes", config.DefaultMaxFileBytes, "largest rule file loaded, in bytes (as serve's)")
	fs.Int64Var(&opts.MaxTotalBytes, "max-config-bytes", config.DefaultMaxTotalBytes, "most bytes of all rule files together (as serve's)")
	fs.BoolVar(&opts.MergeDomains, "merge-domains", false, "merge the files of one domain (as serve's, and envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)")
	fs.StringVar(&format, "format", "text", "output `format`: text (the rule tree; problems on standard error) or json")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, helpText)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return ExitOK
		}
		fmt.Fprintln(stderr, `Run "redlimit check --help" for the flags.`)
		return ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "redlimit check: unexpected argument %q (flags with a value: --name=value)\n", fs.Arg(0))
		return ExitUsage
	case opts.Path == "":
		fmt.Fprintln(stderr, "redlimit check: --config is required (a rule file or a directory of them)")
		return ExitUsage
	case format != "text" && format != "json":
		fmt.Fprintf(stderr, "redlimit check: --format %q: want text or json\n", format)
		return ExitUsage
	}

	r := Check(context.Background(), opts)
	var err error
	if format == "json" {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "redlimit check: %v\n", err)
		return ExitInvalid
	}
	if !r.OK {
		return ExitInvalid
	}
	return ExitOK
}

const helpText = `Usage: redlimit check --config PATH [flags]

Loads the rule files of PATH exactly as "redlimit serve --config PATH" does
and prints their rules: per domain, the descriptor tree with each rule's
limit, algorithm, failure policy, and its shadow and quota modes, counting,
metadata, replaces and name, and each descriptor's value_to_metric and
share_threshold. Exits 0 when the files load, 1 when they do not (each
problem is printed as file:line: field: message, for every bad file), 2 on
a usage error. Give it the same --max-config-* and --merge-domains flags
as serve, if serve has them.

Flags:
`

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
