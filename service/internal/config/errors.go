package config

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error that reports a bad rule file (as
// opposed to a file that cannot be read), so callers can test it with
// [errors.Is].
var ErrInvalid = errors.New("config: invalid rule file")

// ErrTooLarge is wrapped, beside [ErrInvalid], by the error of a rule file
// above [Loader].MaxFileBytes, or of rule files above MaxTotalBytes
// together.
var ErrTooLarge = errors.New("config: rule files too large")

// ErrNotRegular is wrapped, beside [ErrInvalid], by the error of a rule
// file that is not a regular file (after following symbolic links): a
// named pipe, a device or a socket.
var ErrNotRegular = errors.New("config: not a regular file")

// An Error is one problem in a rule file. Parse and Load return them, several
// joined with [errors.Join] when a file has several problems; [errors.As]
// finds the first.
type Error struct {
	// File is the file's name as given to Parse or found by Load.
	File string
	// Line is the 1-based line of the problem, or 0 when it has none.
	Line int
	// Field is the path of the field at fault, such as
	// "descriptors[0].rate_limit.unit", or "" for the whole file.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying cause, such as redlimit.ErrInvalidLimit, or nil.
	Err error
}

// Error returns "file:line: field: msg", leaving out the parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns [ErrInvalid] and the cause, if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// joinErrors returns nil, the one error, or all of them joined.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}
