package sim

import (
	"errors"
	"fmt"
)

// ErrInvalidPattern is wrapped by every error that reports a pattern that
// cannot be simulated: bad generator arguments, too many requests, offsets
// out of order, or a timestamp file that does not parse. Test for it with
// [errors.Is].
var ErrInvalidPattern = errors.New("sim: invalid pattern")

// A ParseError reports a line of a timestamp file that [ParseCSV] could not
// use. It wraps [ErrInvalidPattern].
type ParseError struct {
	// Line is the 1-based line of the file.
	Line int
	// Text is the field at fault, as written, or "" for a malformed line.
	Text string
	// Msg says what is wrong.
	Msg string
}

// Error returns "sim: line N: "text": msg".
func (e *ParseError) Error() string {
	return fmt.Sprintf("sim: line %d: %s", e.Line, e.detail())
}

// detail returns the error without its line: "text": msg.
func (e *ParseError) detail() string {
	if e.Text == "" {
		return e.Msg
	}
	return fmt.Sprintf("%q: %s", e.Text, e.Msg)
}

// Unwrap returns [ErrInvalidPattern].
func (e *ParseError) Unwrap() error { return ErrInvalidPattern }
