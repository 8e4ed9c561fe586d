package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// svgTexts parses an SVG document whole, failing on any XML error, and
// returns its root element's name and the contents of its <text> elements.
func svgTexts(t *testing.T, doc []byte) (root string, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			if tok.Name.Local == "text" {
				inText = true
				texts = append(texts, "")
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	return root, texts
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func TestWriteSVG(t *testing.T) {
	t.Parallel()
	mk := func(p Pattern, err error) Pattern {
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		pattern Pattern
		algs    []redlimit.Algorithm
	}{
		{mk(Straddle(100, time.Minute)), nil},
		{mk(Poisson(2, 24*time.Hour, 1)), nil},
		{mk(Steady(3, 10*time.Minute)), []redlimit.Algorithm{redlimit.SlidingWindow, redlimit.TokenBucket}},
	} {
		r, err := Run(context.Background(), redlimit.PerMinute(100), tc.pattern, &Options{Algorithms: tc.algs})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := r.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes of SVG", tc.pattern.Name, buf.Len())
		root, texts := svgTexts(t, buf.Bytes())
		if root != "svg" {
			t.Errorf("%s: root element <%s>, want <svg>", tc.pattern.Name, root)
		}
		// One legend entry, so one series, per algorithm run, and no other.
		for _, a := range allAlgorithms {
			want := 0
			if tc.algs == nil || count(algNames(tc.algs), a.String()) > 0 {
				want = 1
			}
			if got := count(texts, a.String()); got != want {
				t.Errorf("%s: legend has %q %d times, want %d", tc.pattern.Name, a, got, want)
			}
		}
		for _, want := range []string{"limit: 100 per 1m", "admitted in the last 1m"} {
			if count(texts, want) != 1 {
				t.Errorf("%s: no text %q in %q", tc.pattern.Name, want, texts)
			}
		}
		if !strings.Contains(strings.Join(texts, "\n"), "denied per ") {
			t.Errorf("%s: no denied axis in %q", tc.pattern.Name, texts)
		}
		if buf.Len() > 1<<20 {
			t.Errorf("%s: %d bytes of SVG, want under 1 MiB", tc.pattern.Name, buf.Len())
		}
	}
}

func algNames(algs []redlimit.Algorithm) []string {
	var out []string
	for _, a := range algs {
		out = append(out, a.String())
	}
	return out
}

func TestWriteSVGNeedsDecisions(t *testing.T) {
	t.Parallel()
	r := &Report{Count: 1, Period: time.Second, Algorithms: []AlgorithmReport{{Algorithm: redlimit.FixedWindow}}}
	if err := r.WriteSVG(io.Discard); err == nil {
		t.Error("a report without decisions was drawn")
	}
}
