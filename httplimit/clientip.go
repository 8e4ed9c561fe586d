package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ProxyHeader names the header in which trusted proxies record the addresses
// a request came from.
type ProxyHeader uint8

const (
	// XForwardedFor is the X-Forwarded-For header: a comma-separated list
	// of addresses, the client's first, each proxy appending its peer.
	XForwardedFor ProxyHeader = iota
	// Forwarded is the Forwarded header of RFC 7239, whose for= parameters
	// list the same addresses.
	Forwarded
)

// String returns the header's canonical name.
func (h ProxyHeader) String() string {
	if h == Forwarded {
		return "Forwarded"
	}
	return "X-Forwarded-For"
}

// ClientIP finds the address of the client that sent a request, without
// letting the client choose it.
//
// By default it is the host of the request's RemoteAddr: the direct peer.
// Only when that peer is in TrustedProxies is the ProxyHeader believed, and
// then only as far as trusted proxies wrote it: the addresses are walked from
// right to left, skipping trusted proxies, and the first one that is not a
// trusted proxy is the client. Whatever a client puts in the header itself
// is to the left of that, and is never used. If an entry cannot be parsed
// (such as "unknown"), the nearest trusted address is used instead; if every
// entry is a trusted proxy, the left-most is the client.
//
// Addresses are grouped into networks so that a client cannot escape its
// limit by using many addresses: by default each IPv4 address stands alone
// (/32), while IPv6 clients are grouped by /64, the smallest network a
// site is usually given. IPv4-mapped IPv6 addresses (::ffff:192.0.2.1) count
// as IPv4, and zones are dropped.
//
// The zero value is ready to use; [RemoteIP] is its Key. A ClientIP is
// safe for concurrent use as long as its fields are not changed.
type ClientIP struct {
	// TrustedProxies lists the networks of the proxies in front of the
	// server whose ProxyHeader is believed. Empty: none, so only the
	// remote address counts.
	TrustedProxies []netip.Prefix
	// ProxyHeader is the header the trusted proxies set: X-Forwarded-For
	// (the zero value) or Forwarded. Only one is read, since a proxy that
	// sets one usually passes a forged other through untouched.
	ProxyHeader ProxyHeader
	// IPv4PrefixLen groups IPv4 clients into networks of this many bits,
	// 1..32; 0 means 32.
	IPv4PrefixLen int
	// IPv6PrefixLen groups IPv6 clients into networks of this many bits,
	// 1..128; 0 means 64.
	IPv6PrefixLen int
}

// RemoteIP keys requests by the network of their remote address, trusting
// no forwarding header: [ClientIP]{}.Key.
var RemoteIP KeyFunc = ClientIP{}.Key

// IPKey returns c.Key after checking c with [ClientIP.Validate].
func IPKey(c ClientIP) (KeyFunc, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...) // callers may reuse their slice
	return c.Key, nil
}

// Validate reports whether every trusted proxy network is valid and the
// prefix lengths are in range.
func (c ClientIP) Validate() error {
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("httplimit: trusted proxy %d (%q) is not a valid network", i, p)
		}
	}
	if c.ProxyHeader > Forwarded {
		return fmt.Errorf("httplimit: unknown proxy header %d", c.ProxyHeader)
	}
	if c.IPv4PrefixLen < 0 || c.IPv4PrefixLen > 32 {
		return fmt.Errorf("httplimit: IPv4 prefix length %d is not in 1..32", c.IPv4PrefixLen)
	}
	if c.IPv6PrefixLen < 0 || c.IPv6PrefixLen > 128 {
		return fmt.Errorf("httplimit: IPv6 prefix length %d is not in 1..128", c.IPv6PrefixLen)
	}
	return nil
}

// Key returns the network of the client of r as a string, such as
// "192.0.2.1" or "2001:db8:0:1::/64". It has the signature of a [KeyFunc].
func (c ClientIP) Key(r *http.Request) (string, error) {
	a, err := c.Addr(r)
	if err != nil {
		return "", err
	}
	return c.networkKey(a)
}

// Addr returns the address of the client of r, as the type documentation
// describes.
func (c ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	var hops []string
	if len(c.TrustedProxies) > 0 {
		hops = r.Header.Values(c.ProxyHeader.String())
	}
	return c.Resolve(r.RemoteAddr, hops)
}

// Resolve returns the client's address from the direct peer's address
// (host:port, or a bare host) and the lines of the ProxyHeader, as the type
// documentation describes. Transports other than HTTP use it; grpclimit
// passes a gRPC peer's address and metadata.
func (c ClientIP) Resolve(peer string, header []string) (netip.Addr, error) {
	a, ok := parseHost(peer)
	if !ok {
		return netip.Addr{}, fmt.Errorf("httplimit: cannot parse the peer address %q", peer)
	}
	if !c.trusted(a) || len(header) == 0 {
		return a, nil
	}
	var hops []string
	for _, line := range header {
		if c.ProxyHeader == Forwarded {
			hops = append(hops, forwardedFor(line)...)
		} else {
			hops = append(hops, strings.Split(line, ",")...)
		}
	}
	nearest := a
	for i := len(hops) - 1; i >= 0; i-- {
		var h netip.Addr
		if c.ProxyHeader == Forwarded {
			h, ok = parseNode(hops[i])
		} else {
			h, ok = parseHost(strings.TrimSpace(hops[i]))
		}
		if !ok {
			return nearest, nil
		}
		if !c.trusted(h) {
			return h, nil
		}
		nearest = h
	}
	return nearest, nil
}

// Network returns the network a is grouped into, or an error if the prefix
// length configured for its family is out of range.
func (c ClientIP) Network(a netip.Addr) (netip.Prefix, error) {
	a = a.Unmap().WithZone("")
	bits := c.IPv6PrefixLen
	if bits == 0 {
		bits = 64
	}
	if a.Is4() {
		bits = c.IPv4PrefixLen
		if bits == 0 {
			bits = 32
		}
	}
	if bits < 1 {
		return netip.Prefix{}, fmt.Errorf("httplimit: prefix length %d is not valid", bits)
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("httplimit: %w", err)
	}
	return p, nil
}

func (c ClientIP) networkKey(a netip.Addr) (string, error) {
	p, err := c.Network(a)
	if err != nil {
		return "", err
	}
	if p.IsSingleIP() {
		return p.Addr().String(), nil
	}
	return p.String(), nil
}

// trusted reports whether a is in one of the trusted proxy networks.
func (c ClientIP) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHost parses an address with or without a port, IPv6 with or without
// brackets, unmapped and without its zone.
func parseHost(s string) (netip.Addr, bool) {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// parseNode parses the node of a Forwarded for= parameter (RFC 7239,
// Section 6): an IPv4 address or a bracketed IPv6 address, either with an
// optional port. "unknown" and obfuscated identifiers are not addresses.
func parseNode(s string) (netip.Addr, bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		return a.Unmap().WithZone(""), true
	}
	if host, _, ok := strings.Cut(s, ":"); ok {
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// forwardedFor returns the for= value of each element of one Forwarded
// header line, in order, unquoted; "" for an element without one.
func forwardedFor(line string) []string {
	var out []string
	for _, elem := range splitQuoted(line, ',') {
		v := ""
		for _, pair := range splitQuoted(elem, ';') {
			name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
				v = unquote(strings.TrimSpace(value))
			}
		}
		out = append(out, v)
	}
	return out
}

// splitQuoted splits s at each sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote returns the content of an HTTP quoted-string, or s if it is not one.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
