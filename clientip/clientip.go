// Package clientip finds the network address of the client that sent a
// request, without letting the client choose it. That is the direct
// peer's address. Behind trusted reverse proxies, it is the right-most
// address of X-Forwarded-For or Forwarded (RFC 7239) that no trusted proxy
// wrote. It groups addresses into networks (IPv6 by /64). So one host
// cannot rotate through its addresses.
//
// It serves HTTP and gRPC alike. [Resolver.Key] reads an [http.Request].
// [Resolver.KeyOf] takes a peer address and the forwarding header's field
// lines from any transport. grpclimit passes a gRPC peer and its metadata.
package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
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

// Resolver finds the address of the client that sent a request, without
// letting the client choose it.
//
// By default it is the host of the request's RemoteAddr: the direct peer.
// Only when that peer is in TrustedProxies is the ProxyHeader believed, and
// then only as far as trusted proxies wrote it. The header is read from its
// end, one element at a time; the field lines in order form one list. The
// peer appended the last element. The proxy that the next element names
// appended each one before it. So the elements are walked from right to
// left while they name trusted proxies. The first address that is not a
// trusted proxy is the client. Whatever the client wrote is to the left of
// the element its first proxy appended. Finding where that element starts
// never depends on it. So an unterminated quote, or any other bytes a
// client sends, cannot reach into the proxies' elements.
//
// An element may be malformed or name no address: "unknown", an obfuscated
// identifier, a Forwarded element without for= or with two, a bad port.
// It stops the walk. The nearest trusted address is then the client. That
// is the peer itself if nothing trustworthy remains; it is never a value
// the client wrote. If every element names a trusted proxy, the left-most
// is the client. Empty list elements and empty lines are skipped. At most
// 32 elements are read. So the work per request is bounded by the bytes of
// those elements. Forwarded is read as RFC 7239 defines it: tokens and
// quoted-strings with escapes, commas and semicolons only outside quotes.
// X-Forwarded-For is read as addresses separated by commas, each with an
// optional numeric port.
//
// Addresses are grouped into networks, so a client cannot escape its
// limit by using many addresses. By default each IPv4 address stands alone
// (/32). IPv6 clients are grouped by /64, the smallest network a site is
// usually given. IPv4-mapped IPv6 addresses (::ffff:192.0.2.1) count as
// IPv4, and zones are dropped.
//
// The zero value is ready to use: it trusts no proxy. A Resolver is safe
// for concurrent use as long as its fields are not changed.
type Resolver struct {
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

// Validate reports whether every trusted proxy network is valid and the
// prefix lengths are in range.
func (c Resolver) Validate() error {
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("clientip: trusted proxy %d (%q) is not a valid network", i, p)
		}
	}
	if c.ProxyHeader > Forwarded {
		return fmt.Errorf("clientip: unknown proxy header %d", c.ProxyHeader)
	}
	if c.IPv4PrefixLen < 0 || c.IPv4PrefixLen > 32 {
		return fmt.Errorf("clientip: IPv4 prefix length %d is not in 1..32", c.IPv4PrefixLen)
	}
	if c.IPv6PrefixLen < 0 || c.IPv6PrefixLen > 128 {
		return fmt.Errorf("clientip: IPv6 prefix length %d is not in 1..128", c.IPv6PrefixLen)
	}
	return nil
}

// Key returns the network of the client of r as a string, such as
// "192.0.2.1" or "2001:db8:0:1::/64": KeyOf of r's RemoteAddr and its
// ProxyHeader lines. It has the signature of an httplimit.KeyFunc.
func (c Resolver) Key(r *http.Request) (string, error) {
	return c.KeyOf(r.RemoteAddr, c.headerLines(r.Header))
}

// KeyOf returns the network of the client as a string, such as "192.0.2.1"
// or "2001:db8:0:1::/64". It reads the direct peer's address and the field
// lines of the ProxyHeader. It finds the network as [Resolver.Resolve] and
// [Resolver.Network] do.
func (c Resolver) KeyOf(peer string, header []string) (string, error) {
	a, err := c.Resolve(peer, header)
	if err != nil {
		return "", err
	}
	p, err := c.Network(a)
	if err != nil {
		return "", err
	}
	if p.IsSingleIP() {
		return p.Addr().String(), nil
	}
	return p.String(), nil
}

// Addr returns the address of the client of r, as the type documentation
// describes.
func (c Resolver) Addr(r *http.Request) (netip.Addr, error) {
	return c.Resolve(r.RemoteAddr, c.headerLines(r.Header))
}

// headerLines returns the ProxyHeader's field lines of h, or none when no
// proxy is trusted (they would not be read).
func (c Resolver) headerLines(h http.Header) []string {
	if len(c.TrustedProxies) == 0 {
		return nil
	}
	return h.Values(c.ProxyHeader.String())
}

// Resolve returns the client's address from the direct peer's address
// (host:port, or a bare host) and the field lines of the ProxyHeader, as the
// type documentation describes. Transports other than HTTP use it; grpclimit
// passes a gRPC peer's address and metadata. The header is read only when
// the peer is a trusted proxy.
func (c Resolver) Resolve(peer string, header []string) (netip.Addr, error) {
	a, _, ok := parseHostPort(peer, false)
	if !ok {
		return netip.Addr{}, fmt.Errorf("clientip: cannot parse the peer address %q", peer)
	}
	return c.walk(clean(a), newHopReader(c.ProxyHeader, header)), nil
}

// walk returns the client's address given the direct peer's and a reader
// of the forwarding header. Each element was appended by the proxy whose
// address is the element to its right; the peer appended the last one. So
// an element is believed only while every address to its right is trusted.
func (c Resolver) walk(peer netip.Addr, hops *hopReader) netip.Addr {
	if !c.trusted(peer) {
		return peer
	}
	nearest := peer
	for range maxHops {
		a, kind := hops.next()
		if kind != hopAddr {
			return nearest
		}
		if !c.trusted(a) {
			return a
		}
		nearest = a
	}
	return nearest
}

// Network returns the network a is grouped into, or an error if the prefix
// length configured for its family is out of range.
func (c Resolver) Network(a netip.Addr) (netip.Prefix, error) {
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
		return netip.Prefix{}, fmt.Errorf("clientip: prefix length %d is not valid", bits)
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("clientip: %w", err)
	}
	return p, nil
}

// trusted reports whether a is in one of the trusted proxy networks.
func (c Resolver) trusted(a netip.Addr) bool {
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
