package clientip

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// Fuzz modes: the bits of FuzzProxyAppends's mode byte.
const (
	fuzzForwarded  = 1 << iota // Forwarded rather than X-Forwarded-For
	fuzzSameLine               // the proxy appends to the client's last line, not a line of its own
	fuzzTwoProxies             // client -> 10.0.0.1 -> 10.0.0.2 (the peer), rather than client -> 10.0.0.2
	fuzzIPv6                   // the real client has an IPv6 address
	fuzzParams                 // the first proxy's element carries proto, by and a quoted host
	fuzzEscapeAll              // the quoted host escapes every byte, not only '"' and '\'
	fuzzPort                   // the client's node carries its port
)

// FuzzProxyAppends checks the property that makes Resolver safe:
// whatever a client puts in the forwarding header (any bytes, in any number
// of field lines), once the trusted proxies append their elements, the
// client resolves to its real address. It also checks that Resolve never
// panics and that the bytes it looks at stay within a constant factor of
// the header's size, on the client's bytes alone as well.
func FuzzProxyAppends(f *testing.F) {
	for _, seed := range []struct {
		client string
		mode   uint8
	}{
		{``, 0},
		{`for=9.9.9.9;x="`, fuzzForwarded | fuzzSameLine},
		{`for=9.9.9.9;x="`, fuzzForwarded},
		{`for=9.9.9.9;x="\`, fuzzForwarded | fuzzSameLine | fuzzTwoProxies},
		{`for=9.9.9.9;x="\"`, fuzzForwarded | fuzzSameLine | fuzzIPv6 | fuzzPort},
		{`for="9.9.9.9`, fuzzForwarded | fuzzSameLine | fuzzParams},
		{`for=9.9.9.9"`, fuzzForwarded | fuzzSameLine | fuzzParams | fuzzEscapeAll},
		{`x=\`, fuzzForwarded | fuzzSameLine},
		{`for=10.0.0.7;for=9.9.9.9`, fuzzForwarded | fuzzSameLine},
		{`for="[2001:db8::1]:1";x="\\\\"`, fuzzForwarded | fuzzSameLine | fuzzIPv6},
		{"for=9.9.9.9;x=\"\x00", fuzzForwarded | fuzzSameLine},
		{"for=9.9.9.9;x=\"\r\n\t", fuzzForwarded | fuzzSameLine},
		{"for=9.9.9.9\n\n;;,,\n\"", fuzzForwarded | fuzzTwoProxies},
		{"for=\"[fe80::1%eth0]:80\", ", fuzzForwarded | fuzzSameLine | fuzzIPv6},
		{strings.Repeat(`for=9.9.9.9;x="`, 500), fuzzForwarded | fuzzSameLine},
		{strings.Repeat(`\"`, 500), fuzzForwarded | fuzzSameLine | fuzzParams},
		{strings.Repeat(",", 1000), fuzzForwarded | fuzzSameLine},
		{strings.Repeat("for=10.0.0.9,", 100), fuzzForwarded | fuzzSameLine},
		{"9.9.9.9", 0},
		{"9.9.9.9,", fuzzSameLine},
		{`"9.9.9.9`, fuzzSameLine | fuzzTwoProxies | fuzzIPv6 | fuzzPort},
		{"fe80::1%eth0", fuzzSameLine | fuzzIPv6},
		{"9.9.9.9\r\n 8.8.8.8", fuzzSameLine},
		{strings.Repeat("10.0.0.9, ", 200), fuzzSameLine},
	} {
		f.Add([]byte(seed.client), seed.mode, uint16(7), []byte(`a"b\c, d;e`))
	}
	c := Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}}
	f.Fuzz(func(t *testing.T, client []byte, mode uint8, id uint16, host []byte) {
		c := c
		if mode&fuzzForwarded != 0 {
			c.ProxyHeader = Forwarded
		}
		if a, err := c.Resolve(string(client), nil); err == nil && (!a.IsValid() || a.Zone() != "" || a.Is4In6()) {
			t.Errorf("Resolve(%q) = %#v", client, a)
		}
		lines := strings.Split(string(client), "\n")
		checkWork(t, c, lines)

		real := netip.AddrFrom4([4]byte{198, 51, byte(id >> 8), byte(id)})
		if mode&fuzzIPv6 != 0 {
			real = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 14: byte(id >> 8), 15: byte(id)})
		}
		node := real.String()
		if mode&fuzzPort != 0 {
			node = netip.AddrPortFrom(real, id).String()
		} else if real.Is6() && c.ProxyHeader == Forwarded {
			node = "[" + node + "]"
		}
		elem := node
		if c.ProxyHeader == Forwarded {
			elem = "for=" + node
			if strings.ContainsAny(node, "[:") {
				elem = `for="` + node + `"`
			}
			if mode&fuzzParams != 0 {
				elem += `;proto=https;by=_p1;host=` + quoteForTest(host, mode&fuzzEscapeAll != 0)
			}
		}
		elems := []string{elem}
		if mode&fuzzTwoProxies != 0 {
			elems = append(elems, map[ProxyHeader]string{XForwardedFor: "10.0.0.1", Forwarded: "for=10.0.0.1"}[c.ProxyHeader])
		}
		for _, e := range elems {
			if mode&fuzzSameLine != 0 {
				lines[len(lines)-1] += ", " + e
			} else {
				lines = append(lines, e)
			}
		}
		got := checkWork(t, c, lines)
		if got != real {
			t.Fatalf("%v from 10.0.0.2 with %.200q: %s, want %s", c.ProxyHeader, lines, got, real)
		}
	})
}

// checkWork resolves the client of a request from 10.0.0.2 with the lines,
// checks that Resolve agrees and that the walk read no byte more than three
// times on average (plus a constant per line), and returns the client.
func checkWork(t *testing.T, c Resolver, lines []string) netip.Addr {
	t.Helper()
	peer := netip.MustParseAddr("10.0.0.2")
	hops := newHopReader(c.ProxyHeader, lines)
	got := c.walk(peer, hops)
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	if limit := 3*size + 2*len(lines) + 8; hops.reads > limit {
		t.Errorf("%v with %d lines of %d bytes: %d reads, more than %d", c.ProxyHeader, len(lines), size, hops.reads, limit)
	}
	if a, err := c.Resolve(peer.String()+":443", lines); err != nil || a != got {
		t.Errorf("Resolve: %s, %v; the walk found %s", a, err, got)
	}
	return got
}

// quoteForTest writes b as a quoted-string as a proxy would: control bytes,
// which a quoted-string cannot hold, replaced by '?'; '"' and '\' escaped,
// and every byte if all is set.
func quoteForTest(b []byte, all bool) string {
	var s bytes.Buffer
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case isCTL(c):
			c = '?'
		case all || c == '"' || c == '\\':
			s.WriteByte('\\')
		}
		s.WriteByte(c)
	}
	s.WriteByte('"')
	return s.String()
}

// TestHopReaderWork checks the work bound of the walk on headers built to
// make a naive reader rescan: long runs of backslashes and quotes, many
// empty elements and lines, and a chain of trusted addresses longer than
// the walk reads.
func TestHopReaderWork(t *testing.T) {
	t.Parallel()
	c := Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	fwd := c
	fwd.ProxyHeader = Forwarded
	for _, tt := range []struct {
		c     Resolver
		lines []string
		want  string
	}{
		{fwd, []string{`for=10.0.0.9;x="` + strings.Repeat(`\"`, 1e5) + `"`}, "10.0.0.9"},
		{fwd, []string{`for=10.0.0.9;x="` + strings.Repeat(`\\`, 1e5) + `"`}, "10.0.0.9"},
		{fwd, []string{strings.Repeat(`"`, 1e5) + `, for=10.0.0.9`}, "10.0.0.9"},
		{fwd, []string{"for=198.51.100.1" + strings.Repeat(", ", 1e5)}, "198.51.100.1"},
		{fwd, []string{"for=198.51.100.1" + strings.Repeat(";a=b", 1e5)}, "198.51.100.1"},
		{fwd, []string{"for=198.51.100.1" + strings.Repeat(`;a="\""`, 1e5)}, "198.51.100.1"},
		{fwd, []string{"for=198.51.100.1" + strings.Repeat(";", 1e5)}, "198.51.100.1"},
		{fwd, append([]string{"for=198.51.100.1"}, make([]string, 1e5)...), "198.51.100.1"},
		{fwd, []string{"for=198.51.100.1" + strings.Repeat(", for=10.0.0.9", 1e4)}, "10.0.0.9"},
		{c, []string{"198.51.100.1" + strings.Repeat(", 10.0.0.9", 1e4)}, "10.0.0.9"},
		{c, []string{strings.Repeat("1", 2e5)}, "10.0.0.2"},
		{fwd, []string{"for=" + strings.Repeat("1", 2e5)}, "10.0.0.2"},
		{fwd, []string{`for="` + strings.Repeat("1", 2e5) + `"`}, "10.0.0.2"},
	} {
		got := checkWork(t, tt.c, tt.lines)
		if got.String() != tt.want {
			t.Errorf("%v, %d lines, %.40q...: %s, want %s", tt.c.ProxyHeader, len(tt.lines), tt.lines[0], got, tt.want)
		}
	}
}
