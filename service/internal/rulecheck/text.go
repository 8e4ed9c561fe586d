package rulecheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// WriteText writes the rule tree of r to out, and a summary line. When r
// is not OK, it writes its problems to errOut, one a line, and a summary
// line.
//
// The tree goes per domain, in name order, with its files. Under it go the
// descriptors, in file order, indented by depth, as "key" or "key=value".
// Each row gives:
//   - the line of the descriptor: file:line in a domain merged from
//     several files;
//   - its limit: "10/minute", "10/30 seconds" for a unit_multiplier,
//     "20/second burst 40", "unlimited", "deny all" for
//     requests_per_unit: 0, "-" for a descriptor without one;
//   - its algorithm;
//   - its failure policy: "-" for unlimited and deny all, which ask no
//     store;
//   - notes: shadow, quota, detailed_metric, value_to_metric,
//     share_threshold, counting=, the rule's name, the names it replaces,
//     and its metadata= as JSON.
//
// Keys, values and names that hold spaces, quotes, "=" or unprintable
// characters are quoted as in Go.
func (r *Report) WriteText(out, errOut io.Writer) error {
	if !r.OK {
		var files []string
		for _, p := range r.Problems {
			fmt.Fprintln(errOut, p.Error)
			if p.File != "" && !slices.Contains(files, p.File) {
				files = append(files, p.File)
			}
		}
		where := ""
		if len(files) > 0 {
			where = " in " + count(len(files), "file")
		}
		_, err := fmt.Fprintf(errOut, "redlimit check: %s%s: serve would refuse these rules\n",
			count(len(r.Problems), "problem"), where)
		return err
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, name := range r.Domains {
		d := r.cfg.Domains[name]
		files := d.File
		if len(d.Files) > 1 {
			files = strings.Join(d.Files, ", ")
		}
		fmt.Fprintf(tw, "domain %s (%s): %s\n", show(d.Name), files, count(len(d.Rules()), "rule"))
		if len(d.Descriptors) == 0 {
			fmt.Fprintln(tw, "  no descriptors")
			continue
		}
		fmt.Fprintln(tw, "  DESCRIPTOR\tLINE\tLIMIT\tALGORITHM\tFAILURE\tNOTES")
		writeTree(tw, d.Descriptors, 1, len(d.Files) > 1)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Every row has every cell, so that the columns line up; the padding
	// of empty last cells is dropped.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	if len(r.Files) == 0 {
		fmt.Fprintf(errOut, "redlimit check: warning: no rule files in %s: serve would allow every request\n", r.Path)
	}
	_, err := fmt.Fprintf(out, "ok: %s, %s, %s\n",
		count(len(r.Files), "file"), count(len(r.Domains), "domain"), count(len(r.Rules), "rule"))
	return err
}

// writeTree writes a row per descriptor of ds and their children, at
// depth; withFile puts each descriptor's file name before its line.
func writeTree(w io.Writer, ds []*config.Descriptor, depth int, withFile bool) {
	for _, d := range ds {
		label := show(d.Key)
		if d.Value != "" {
			label += "=" + show(d.Value)
		}
		line := strconv.Itoa(d.Line)
		if withFile {
			line = filepath.Base(d.File) + ":" + line
		}
		cells := []string{strings.Repeat("  ", depth) + label, line}
		cells = append(cells, ruleCells(d.Rule)...)
		cells = append(cells, strings.Join(notes(d), " "))
		fmt.Fprintln(w, strings.Join(cells, "\t"))
		writeTree(w, d.Descriptors, depth+1, withFile)
	}
}

// notes returns the notes of a descriptor's row.
func notes(d *config.Descriptor) []string {
	var notes []string
	r := d.Rule
	if r != nil && r.Shadow {
		notes = append(notes, "shadow")
	}
	if r != nil && r.QuotaMode {
		notes = append(notes, "quota")
	}
	if r != nil && r.DetailedMetric {
		notes = append(notes, "detailed_metric")
	}
	if d.ValueToMetric {
		notes = append(notes, "value_to_metric")
	}
	if d.ShareThreshold {
		notes = append(notes, "share_threshold")
	}
	if r == nil {
		return notes
	}
	if r.Counting != config.CountingDefault && !r.Unlimited {
		notes = append(notes, "counting="+r.Counting.String())
	}
	if r.Name != "" {
		notes = append(notes, "name="+show(r.Name))
	}
	if len(r.Replaces) > 0 {
		names := make([]string, len(r.Replaces))
		for i, n := range r.Replaces {
			names[i] = show(n)
		}
		notes = append(notes, "replaces="+strings.Join(names, ","))
	}
	if r.Metadata != nil {
		if b, err := json.Marshal(r.Metadata.AsMap()); err == nil {
			notes = append(notes, "metadata="+string(b))
		}
	}
	return notes
}

// ruleCells returns the limit, algorithm and failure policy of r.
func ruleCells(r *config.Rule) []string {
	switch {
	case r == nil:
		return []string{"-", "-", "-"}
	case r.Unlimited:
		return []string{"unlimited", "-", "-"}
	case r.DenyAll:
		return []string{"deny all", "-", "-"}
	}
	limit := fmt.Sprintf("%d/%s", r.Limit.Count, r.Unit)
	if r.UnitMultiplier > 1 {
		limit = fmt.Sprintf("%d/%d %ss", r.Limit.Count, r.UnitMultiplier, r.Unit)
	}
	if c := r.Limit.Calendar; !c.IsZero() {
		limit = fmt.Sprintf("%d/calendar %s", r.Limit.Count, c)
	}
	if r.Limit.Algorithm == redlimit.TokenBucket {
		limit += fmt.Sprintf(" burst %d", r.Limit.Burst)
	}
	return []string{limit, r.Limit.Algorithm.String(), r.Limit.Failure.String()}
}

// show returns s as is, or quoted when it is empty or holds a space, a
// quote, "=" or a character that is not printable: a row stays one line
// and its cells stay apart.
func show(s string) string {
	if s == "" {
		return `""`
	}
	for _, c := range s {
		if !unicode.IsGraphic(c) || unicode.IsSpace(c) || c == '"' || c == '=' {
			return strconv.Quote(s)
		}
	}
	return s
}

// count returns "1 rule", "2 rules".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
