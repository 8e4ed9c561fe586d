package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestParseCSVSeconds(t *testing.T) {
	t.Parallel()
	in := "timestamp,path\n0.5,/a\n0,/b\n# a comment\n\n  1.25 ,/c\n2\n"
	p, err := ParseCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(0, 500, 1250, 2000); !slices.Equal(p.Offsets, want) {
		t.Errorf("offsets %v, want %v (sorted)", p.Offsets, want)
	}
	if !p.Start.IsZero() {
		t.Errorf("Start %s, want zero for seconds", p.Start)
	}
}

func TestParseCSVRFC3339(t *testing.T) {
	t.Parallel()
	in := "2024-05-01T12:00:00.250Z\n2024-05-01T12:00:00Z\n2024-05-01T14:00:01+02:00\n"
	p, err := ParseCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC); !p.Start.Equal(want) {
		t.Errorf("Start %s, want %s", p.Start, want)
	}
	if want := ms(0, 250, 1000); !slices.Equal(p.Offsets, want) {
		t.Errorf("offsets %v, want %v", p.Offsets, want)
	}
}

func TestParseCSVErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"not a number", "0\n1\nabc\n", 3, `"abc": not a number of seconds or an RFC 3339 time`},
		{"NaN", "0\nNaN\n", 2, `"NaN": not a number`},
		{"negative", "# comment\n\n1\n-2\n", 4, `"-2": negative`},
		{"unix seconds", "1700000000\n", 1, "write Unix times as RFC 3339"},
		{"bad time", "time\n2024-05-01T00:00:00Z\n2024-05-01T25:00:00Z\n", 3, "not an RFC 3339 time"},
		{"date only", "2024-05-01\n", 1, "not an RFC 3339 time"},
		{"mixed forms", "0.5\n1\n2024-05-01T00:00:00Z\n", 3, "mixes forms: line 1 has seconds, this line an RFC 3339 time"},
		{"empty field", "1,a\n,b\n", 2, "no timestamp in the first field"},
		{"bare quote", "1\n2\"x\n", 2, "bare \""},
	} {
		_, err := ParseCSV(strings.NewReader(tc.in))
		pe, ok := errors.AsType[*ParseError](err)
		if !ok {
			t.Errorf("%s: error %v, want a *ParseError", tc.name, err)
			continue
		}
		if pe.Line != tc.line || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v; want line %d and %q", tc.name, err, tc.line, tc.msg)
		}
		if want := fmt.Sprintf("sim: line %d: ", tc.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %q does not start with %q", tc.name, err, want)
		}
		if !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("%s: %v does not wrap ErrInvalidPattern", tc.name, err)
		}
	}
}

func TestParseCSVEmpty(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "timestamp\n", "# nothing\n\n"} {
		if _, err := ParseCSV(strings.NewReader(in)); !errors.Is(err, ErrInvalidPattern) || !strings.Contains(err.Error(), "no timestamps") {
			t.Errorf("ParseCSV(%q): %v, want no timestamps", in, err)
		}
	}
}

func TestParseCSVReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := ParseCSV(iotest.ErrReader(boom))
	if !errors.Is(err, boom) || errors.Is(err, ErrInvalidPattern) {
		t.Errorf("error %v, want the reader's error", err)
	}
}
