package ratelimitfield

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file parses the subset of Structured Field Values (RFC 9651) that the
// RateLimit and RateLimit-Policy fields use: a List of Items, each with
// Parameters. Inner lists, which neither field allows, are an error.

// errSyntax reports a field value that is not a structured-field List.
var errSyntax = errors.New("ratelimitfield: malformed structured field")

// sfToken is a Token bare item, kept apart from a String.
type sfToken string

// sfParam is one parameter of an item, in field order.
type sfParam struct {
	key   string
	value any // int64, float64, string, sfToken, []byte or bool
}

// sfItem is one member of a List.
type sfItem struct {
	value  any
	params []sfParam
}

// param returns the value of the parameter named key, and whether it is there.
// When a key is repeated, the last value wins (RFC 9651, Section 4.2.3.2).
func (it sfItem) param(key string) (any, bool) {
	var v any
	found := false
	for _, p := range it.params {
		if p.key == key {
			v, found = p.value, true
		}
	}
	return v, found
}

// parseList parses the field lines of one field as a List, combining them as
// RFC 9651 Section 4.2 says: joined with commas.
func parseList(lines []string) ([]sfItem, error) {
	p := &sfParser{s: strings.Join(lines, ",")}
	p.skipSP()
	var items []sfItem
	for p.i < len(p.s) {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skipOWS()
		if p.i == len(p.s) {
			break
		}
		if p.s[p.i] != ',' {
			return nil, p.errorf("want ',' after a list member")
		}
		p.i++
		p.skipOWS()
		if p.i == len(p.s) {
			return nil, p.errorf("trailing ','")
		}
	}
	return items, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, p.i, fmt.Sprintf(format, args...))
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	if p.i < len(p.s) && p.s[p.i] == '(' {
		return sfItem{}, p.errorf("inner lists are not allowed here")
	}
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{value: v}
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var pv any = true
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if pv, err = p.bareItem(); err != nil {
				return sfItem{}, err
			}
		}
		it.params = append(it.params, sfParam{key: k, value: pv})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if p.i >= len(p.s) || !(isLCAlpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", p.errorf("want a parameter key")
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bareItem() (any, error) {
	if p.i >= len(p.s) {
		return nil, p.errorf("want an item")
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case isAlpha(c) || c == '*':
		return p.token(), nil
	}
	return nil, p.errorf("unexpected %q", p.s[p.i])
}

func (p *sfParser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if isDigit(c) {
			digits++
		} else if c == '.' && dot < 0 {
			dot = digits
		} else {
			break
		}
		p.i++
	}
	text := p.s[start:p.i]
	switch {
	case digits == 0:
		return nil, p.errorf("want digits")
	case dot < 0:
		if digits > 15 {
			return nil, p.errorf("integer %s has more than 15 digits", text)
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, p.errorf("integer %s: %v", text, err)
		}
		return n, nil
	default:
		if dot == digits || dot > 12 || digits-dot > 3 {
			return nil, p.errorf("bad decimal %s", text)
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, p.errorf("decimal %s: %v", text, err)
		}
		return f, nil
	}
}

func (p *sfParser) str() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return "", p.errorf("bad escape in a string")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errorf("byte %#x in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *sfParser) token() sfToken {
	start := p.i
	p.i++
	for p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return sfToken(p.s[start:p.i])
}

func (p *sfParser) bytes() ([]byte, error) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errorf("unterminated byte sequence")
	}
	b, err := base64.StdEncoding.DecodeString(p.s[p.i : p.i+end])
	if err != nil {
		return nil, p.errorf("byte sequence: %v", err)
	}
	p.i += end + 1
	return b, nil
}

func (p *sfParser) boolean() (bool, error) {
	p.i++
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '1':
			p.i++
			return true, nil
		case '0':
			p.i++
			return false, nil
		}
	}
	return false, p.errorf("want ?0 or ?1")
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || ('A' <= c && c <= 'Z') }

// isTchar reports whether c is a tchar of RFC 9110.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// quoteString writes s as a structured-field String (RFC 8941): quoted,
// with '"' and '\' escaped and any byte outside printable ASCII, which a
// String cannot hold, replaced by '?'.
func quoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e: // outside what a String may hold
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
