package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxCSVSeconds bounds a timestamp given in seconds, and the span of a file
// of RFC 3339 times: about 31 years. A larger number is most likely a Unix
// time, which the error then suggests writing as RFC 3339.
const maxCSVSeconds = 1e9

// ParseCSV reads a pattern from a file of request timestamps, one request a
// line. The first field of each line is the timestamp; further fields are
// ignored, so a log exported as CSV can be used as it is. A timestamp is
// either
//
//   - a number of seconds from the start of the simulation, such as 12 or
//     0.25, which [Run] puts on a window boundary, or
//   - an RFC 3339 time, such as 2024-05-01T12:00:00.250Z: the pattern then
//     starts at the earliest of them, so windows fall where they fell when
//     the requests were made.
//
// A file uses one form throughout. Blank lines and lines starting with #
// are skipped, and so is a first line without a digit, taken for a header
// ("timestamp"). Timestamps need not be in order: the pattern sorts them.
//
// Errors report the first bad line as a [*ParseError], which wraps
// [ErrInvalidPattern]; an error reading r is returned as it is.
func ParseCSV(r io.Reader) (Pattern, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	var (
		micros  []int64 // seconds form: offsets; RFC 3339 form: Unix µs
		rfc3339 bool
		first   = 0 // line of the first timestamp, which sets the form
	)
	for n := 0; ; n++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			if pe, ok := errors.AsType[*csv.ParseError](err); ok {
				return Pattern{}, &ParseError{Line: pe.Line, Msg: pe.Err.Error()}
			}
			return Pattern{}, fmt.Errorf("sim: reading timestamps: %w", err)
		}
		line, _ := cr.FieldPos(0)
		text := strings.TrimSpace(rec[0])
		if n == 0 && !strings.ContainsAny(text, "0123456789") {
			continue // a header
		}
		if text == "" {
			return Pattern{}, &ParseError{Line: line, Msg: "no timestamp in the first field"}
		}
		isTime := strings.ContainsAny(text, "T:") || strings.Count(text, "-") > 1
		if first == 0 {
			first, rfc3339 = line, isTime
		} else if isTime != rfc3339 {
			return Pattern{}, &ParseError{Line: line, Text: text, Msg: fmt.Sprintf(
				"mixes forms: line %d has %s, this line %s; use one form throughout",
				first, formName(rfc3339), formName(isTime))}
		}
		if len(micros) == MaxArrivals {
			return Pattern{}, &ParseError{Line: line, Msg: fmt.Sprintf("more than %d requests", MaxArrivals)}
		}
		var us int64
		if isTime {
			t, err := time.Parse(time.RFC3339Nano, text)
			if err != nil {
				return Pattern{}, &ParseError{Line: line, Text: text, Msg: "not an RFC 3339 time (such as 2024-05-01T12:00:00.250Z)"}
			}
			us = t.UnixMicro()
		} else {
			s, err := strconv.ParseFloat(text, 64)
			switch {
			case err != nil || math.IsNaN(s) || math.IsInf(s, 0):
				return Pattern{}, &ParseError{Line: line, Text: text, Msg: "not a number of seconds or an RFC 3339 time"}
			case s < 0:
				return Pattern{}, &ParseError{Line: line, Text: text, Msg: "negative: seconds count from the start of the simulation"}
			case s > maxCSVSeconds:
				return Pattern{}, &ParseError{Line: line, Text: text, Msg: fmt.Sprintf(
					"more than %.0f seconds from the start; seconds count from the start of the simulation, so write Unix times as RFC 3339", float64(maxCSVSeconds))}
			}
			us = int64(math.Round(s * 1e6))
		}
		micros = append(micros, us)
	}
	if len(micros) == 0 {
		return Pattern{}, fmt.Errorf("%w: no timestamps", ErrInvalidPattern)
	}

	slices.Sort(micros)
	p := Pattern{Name: fmt.Sprintf("%d timestamps", len(micros)), Offsets: make([]time.Duration, len(micros))}
	base := int64(0)
	if rfc3339 {
		base = micros[0]
		p.Start = time.UnixMicro(base).UTC()
		if span := float64(micros[len(micros)-1]-base) / 1e6; span > maxCSVSeconds {
			return Pattern{}, fmt.Errorf("%w: the timestamps span %.0f seconds, more than %.0f", ErrInvalidPattern, span, float64(maxCSVSeconds))
		}
	}
	for i, us := range micros {
		p.Offsets[i] = time.Duration(us-base) * time.Microsecond
	}
	return p, nil
}

func formName(rfc3339 bool) string {
	if rfc3339 {
		return "an RFC 3339 time"
	}
	return "seconds"
}
