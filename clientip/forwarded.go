package clientip

import (
	"net/netip"
	"strings"
)

// This file reads forwarding headers (X-Forwarded-For, and Forwarded of
// RFC 7239) from the right, one element at a time, the way [Resolver]
// walks them. Reading from the right is what makes them safe. A trusted
// proxy appends its element after whatever the client sent. So the
// elements the trusted proxies wrote are the last ones. Their bounds can
// be found without reading anything to their left. A forward parse lets a
// client's bytes decide where the proxy's element starts: an open quote
// swallows it. This reader never does.
//
// The grammar, from RFC 7239 Section 4 and RFC 9110 Section 5.6:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//	quoted-string     = DQUOTE *( qdtext / quoted-pair ) DQUOTE
//	quoted-pair       = "\" ( HTAB / SP / VCHAR / obs-text )
//
// A list (1#) is split at commas outside quoted strings, with optional
// whitespace (SP, HTAB) around them. Empty elements are skipped, as RFC
// 9110 asks. The field lines of one header are elements of one list, the
// last line last. Two tolerances apply, and neither moves a boundary. OWS
// is allowed around ';'. An unquoted value may hold '[', ']' and ':', for
// proxies that leave an IPv6 node or a port unquoted.
//
// X-Forwarded-For has no standard. It is read as a list of addresses,
// each optionally with a numeric port. It is split at every comma: it has
// no quoting.

// maxHops bounds the non-empty elements one walk reads. So the work per
// request is bounded by the bytes of those elements and the empty ones
// between them. It is not bounded by the chain a client may claim.
const maxHops = 32

// maxNode is the longest node or X-Forwarded-For entry read as an address:
// a bracketed IPv6 address with a zone and a port fits with room to spare.
// Longer ones are not addresses, and are not copied or parsed.
const maxNode = 128

// hopKind says what one element of a forwarding header holds.
type hopKind uint8

const (
	hopEnd   hopKind = iota // no element is left
	hopAddr                 // an element naming an address
	hopStop                 // an element that is malformed or names no address
	hopEmpty                // an empty list element, which does not count
)

// hopReader reads the elements of a forwarding header from the right: from
// the last field line to the first, and each line from its end. It looks at
// each byte at most three times and allocates only to unescape a quoted node.
type hopReader struct {
	forwarded bool     // Forwarded (RFC 7239) rather than X-Forwarded-For
	lines     []string // the field lines not yet read to their start
	end       int      // the unread part of the last of lines is [:end]
	reads     int      // bytes looked at, for tests to check the work
}

// newHopReader returns a reader of the field lines of header h.
func newHopReader(h ProxyHeader, lines []string) *hopReader {
	r := &hopReader{forwarded: h == Forwarded, lines: lines}
	if len(lines) > 0 {
		r.end = len(lines[len(lines)-1])
	}
	return r
}

// next returns the next non-empty element from the right: an address
// (hopAddr), hopStop for an element that is not one, or hopEnd. After
// hopStop the reader's position is unspecified.
func (r *hopReader) next() (netip.Addr, hopKind) {
	for len(r.lines) > 0 {
		s := r.lines[len(r.lines)-1][:r.end]
		var (
			a     netip.Addr
			kind  hopKind
			start int // the index of the comma before the element, or -1
		)
		if r.forwarded {
			a, kind, start = r.forwardedElement(s)
		} else {
			a, kind, start = r.xffElement(s)
		}
		if start >= 0 {
			r.end = start
		} else if r.lines = r.lines[:len(r.lines)-1]; len(r.lines) > 0 {
			r.end = len(r.lines[len(r.lines)-1])
		}
		if kind != hopEmpty {
			return a, kind
		}
	}
	return netip.Addr{}, hopEnd
}

// at returns s[i], counting the read.
func (r *hopReader) at(s string, i int) byte {
	r.reads++
	return s[i]
}

// skipOWS returns the index left of the optional whitespace that ends s[:i].
func (r *hopReader) skipOWS(s string, i int) int {
	for i > 0 && isOWS(r.at(s, i-1)) {
		i--
	}
	return i
}

// xffElement reads the last X-Forwarded-For entry of s.
func (r *hopReader) xffElement(s string) (netip.Addr, hopKind, int) {
	i := len(s)
	for i > 0 && r.at(s, i-1) != ',' {
		i--
	}
	entry := trimOWS(s[i:])
	r.reads += len(s) - i // trimOWS and the address parser read the entry again
	if entry == "" {
		return netip.Addr{}, hopEmpty, i - 1
	}
	a, bracketed, ok := parseHostPort(entry, false)
	if !ok || (bracketed && !a.Is6()) {
		return netip.Addr{}, hopStop, i - 1
	}
	return clean(a), hopAddr, i - 1
}

// forwardedElement reads the last forwarded-element of s, from the right:
// its pairs, each value then '=' then name, separated by ';'. Its for=
// node is the address. Some elements are hopStop: one that does not match
// the grammar, has no for= or two of them, or whose node is not an
// address.
func (r *hopReader) forwardedElement(s string) (netip.Addr, hopKind, int) {
	var (
		node      string
		hasFor    bool
		escaped   bool // node is a quoted-string with quoted-pairs
		empty     = true
		afterPair bool // a pair was just read: a ';', a ',' or the start must come next
	)
	i := len(s)
	for {
		if i = r.skipOWS(s, i); i == 0 {
			break
		}
		c := r.at(s, i-1)
		if c == ',' {
			break
		}
		empty = false
		if c == ';' {
			i, afterPair = i-1, false
			continue
		}
		if afterPair {
			return netip.Addr{}, hopStop, -1
		}
		// The value: a quoted-string or a token.
		j, esc := i, false
		if c == '"' {
			if j, esc = r.quotedStart(s, i); j < 0 {
				return netip.Addr{}, hopStop, -1
			}
		} else {
			for j > 0 && isValueChar(r.at(s, j-1)) {
				j--
			}
			if j == i {
				return netip.Addr{}, hopStop, -1
			}
		}
		value := s[j:i]
		if j == 0 || r.at(s, j-1) != '=' {
			return netip.Addr{}, hopStop, -1
		}
		i = j - 1
		for j = i; j > 0 && isTchar(r.at(s, j-1)); j-- {
		}
		if j == i {
			return netip.Addr{}, hopStop, -1
		}
		if strings.EqualFold(s[j:i], "for") {
			if hasFor {
				return netip.Addr{}, hopStop, -1
			}
			node, hasFor, escaped = value, true, esc
		}
		i, afterPair = j, true
	}
	if empty {
		return netip.Addr{}, hopEmpty, i - 1
	}
	if !hasFor {
		return netip.Addr{}, hopStop, i - 1
	}
	a, ok := parseNode(node, escaped)
	if !ok {
		return netip.Addr{}, hopStop, i - 1
	}
	return a, hopAddr, i - 1
}

// quotedStart returns the index of the quote that opens the quoted-string
// ending at s[end-1] (a '"'), and whether it holds quoted-pairs; -1 if no
// valid quoted-string ends there. A quote preceded by an odd run of
// backslashes is escaped; by an even one (or none), it opens the string.
// Inside a valid quoted-string that is exactly how a left-to-right parse
// reads it, so a well-formed string is read the same from either side.
func (r *hopReader) quotedStart(s string, end int) (int, bool) {
	n := r.backslashesBefore(s, end-1)
	if n%2 == 1 { // the closing quote is escaped: no string ends here
		return -1, false
	}
	esc := n > 0
	for i := end - 1 - n; i > 0; {
		switch c := r.at(s, i-1); {
		case c == '"':
			n := r.backslashesBefore(s, i-1)
			if n%2 == 0 {
				return i - 1, esc
			}
			esc = true
			i -= 1 + n
		case c == '\\':
			esc = true
			i--
		case isCTL(c):
			return -1, false
		default:
			i--
		}
	}
	return -1, false
}

// backslashesBefore returns the length of the run of backslashes that ends
// just before s[i].
func (r *hopReader) backslashesBefore(s string, i int) int {
	n := 0
	for i-n > 0 && r.at(s, i-n-1) == '\\' {
		n++
	}
	return n
}

// parseNode parses the node of a for= value (RFC 7239, Section 6). That is
// an IPv4 address or a bracketed IPv6 address, quoted or not. Either has
// an optional port: digits, or an obfuscated "_port". "unknown" and
// obfuscated identifiers are not addresses. The zone is dropped, and
// IPv4-mapped addresses count as IPv4.
func parseNode(v string, escaped bool) (netip.Addr, bool) {
	if len(v) > maxNode+2 {
		return netip.Addr{}, false
	}
	if len(v) >= 2 && v[0] == '"' {
		v = v[1 : len(v)-1]
		if escaped {
			v = unescape(v)
		}
	}
	a, bracketed, ok := parseHostPort(v, true)
	if !ok || bracketed != a.Is6() {
		return netip.Addr{}, false
	}
	return clean(a), true
}

// parseHostPort parses "host", "host:port", "[host]" or "[host]:port", and
// reports whether the host was bracketed. The port is 1 to 5 digits, or,
// if obfuscated is set, '_' and letters, digits, '.', '_' or '-'. An
// unbracketed host with one colon is an IPv4 address and a port; with more,
// an IPv6 address alone.
func parseHostPort(s string, obfuscated bool) (netip.Addr, bool, bool) {
	if len(s) > maxNode {
		return netip.Addr{}, false, false
	}
	host, bracketed := s, false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false, false
		}
		host, bracketed = s[1:end], true
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:], obfuscated)) {
			return netip.Addr{}, false, false
		}
	} else if h, port, ok := strings.Cut(s, ":"); ok && !strings.Contains(port, ":") {
		if !validPort(port, obfuscated) {
			return netip.Addr{}, false, false
		}
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false, false
	}
	return a, bracketed, true
}

// validPort reports whether p is 1 to 5 digits or, if obfuscated is set, an
// obfport of RFC 7239: '_' and one or more letters, digits, '.', '_', '-'.
func validPort(p string, obfuscated bool) bool {
	if obfuscated && len(p) > 1 && p[0] == '_' {
		for i := 1; i < len(p); i++ {
			if c := p[i]; !isAlpha(c) && !isDigit(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	if len(p) < 1 || len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if !isDigit(p[i]) {
			return false
		}
	}
	return true
}

// clean returns a without its zone, IPv4-mapped addresses as IPv4.
func clean(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// unescape returns the content of a valid quoted-string (without its
// quotes) with its quoted-pairs replaced by the byte they quote.
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// trimOWS returns s without leading and trailing SP and HTAB.
func trimOWS(s string) string {
	for s != "" && isOWS(s[0]) {
		s = s[1:]
	}
	for s != "" && isOWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// isCTL reports whether c is a control byte that no quoted-string holds:
// any below SP but HTAB, and DEL.
func isCTL(c byte) bool { return (c < ' ' && c != '\t') || c == 0x7f }

// isValueChar reports whether c may appear in an unquoted value: a tchar,
// or '[', ']', ':' (see the tolerances above).
func isValueChar(c byte) bool { return isTchar(c) || c == '[' || c == ']' || c == ':' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isTchar reports whether c is a tchar of RFC 9110.
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
