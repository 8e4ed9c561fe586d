package clientip_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/clientip"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestKey(t *testing.T) {
	t.Parallel()
	proxies := prefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	tests := []struct {
		name   string
		c      clientip.Resolver
		remote string
		header map[string][]string
		want   string
	}{
		{name: "remote only", remote: "192.0.2.7:1234", want: "192.0.2.7"},
		{name: "remote without port", remote: "192.0.2.7", want: "192.0.2.7"},
		{name: "forged XFF from an untrusted peer", remote: "192.0.2.7:1234",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "192.0.2.7"},
		{name: "forged XFF, no proxies configured", c: clientip.Resolver{}, remote: "10.1.1.1:1",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "10.1.1.1"},
		{name: "trusted proxy: right-most untrusted hop", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9, 10.0.0.1"}}, want: "198.51.100.9"},
		{name: "trusted proxy: several header lines in order", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9", "10.0.0.7"}}, want: "198.51.100.9"},
		{name: "trusted proxy: garbage left of the client is ignored", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"not-an-ip, 198.51.100.9"}}, want: "198.51.100.9"},
		{name: "trusted proxy: unparsable hop falls back to the nearest trusted", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9, unknown, 10.0.0.1"}}, want: "10.0.0.1"},
		{name: "trusted proxy: every hop trusted takes the left-most", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"10.9.9.9, 10.0.0.1"}}, want: "10.9.9.9"},
		{name: "trusted proxy without header", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80", want: "10.0.0.2"},
		{name: "trusted proxy: XFF with ports and brackets", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9:5555"}}, want: "198.51.100.9"},
		{name: "trusted proxy: XFF IPv6 grouped by /64", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"[2001:db8:1:2:3:4:5:6]:443"}}, want: "2001:db8:1:2::/64"},
		{name: "Forwarded is ignored when XFF is configured", c: clientip.Resolver{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {"for=198.51.100.9"}}, want: "10.0.0.2"},
		{name: "Forwarded: quoted IPv6 with port", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for="[2001:db8::1]:4711";proto=https, for=10.0.0.1`}}, want: "2001:db8::/64"},
		{name: "Forwarded: case, spaces, several pairs", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`For=192.0.2.60;proto=http;by=203.0.113.43`, `for=198.51.100.17; by="[2001:db8:ffff::1]"`}}, want: "198.51.100.17"},
		{name: "Forwarded: quoted comma stays in its element", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=192.0.2.1;host="a,b", for="10.0.0.3:99"`}}, want: "192.0.2.1"},
		{name: "Forwarded: unknown falls back to the nearest trusted", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=unknown, for="[2001:db8:ffff::9]"`}}, want: "2001:db8:ffff::/64"},
		{name: "Forwarded: obfuscated identifier", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=_hidden`}}, want: "10.0.0.2"},
		{name: "Forwarded: unbracketed IPv6 is invalid", c: clientip.Resolver{TrustedProxies: proxies, ProxyHeader: clientip.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for="2001:db8::1"`}}, want: "10.0.0.2"},
		{name: "IPv6 remote grouped by /64", remote: "[2001:db8:aa:bb:1::1]:9", want: "2001:db8:aa:bb::/64"},
		{name: "IPv6 zone dropped", remote: "[fe80::1%eth0]:9", want: "fe80::/64"},
		{name: "IPv6 /48", c: clientip.Resolver{IPv6PrefixLen: 48}, remote: "[2001:db8:aa:bb::1]:9", want: "2001:db8:aa::/48"},
		{name: "IPv6 /128", c: clientip.Resolver{IPv6PrefixLen: 128}, remote: "[2001:db8::1]:9", want: "2001:db8::1"},
		{name: "IPv4 /24", c: clientip.Resolver{IPv4PrefixLen: 24}, remote: "192.0.2.77:9", want: "192.0.2.0/24"},
		{name: "IPv4-mapped IPv6 is IPv4", remote: "[::ffff:192.0.2.7]:9", want: "192.0.2.7"},
		{name: "IPv4-mapped trusted proxy", c: clientip.Resolver{TrustedProxies: prefixes("::ffff:10.0.0.0/104")}, remote: "10.0.0.2:1",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, want: "198.51.100.9"},
		{name: "IPv4-mapped hop", c: clientip.Resolver{TrustedProxies: proxies}, remote: "[::ffff:10.0.0.2]:1",
			header: map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.9"}}, want: "198.51.100.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for k, vs := range tt.header {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			if err := tt.c.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := tt.c.Key(r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("key %q, want %q", got, tt.want)
			}
		})
	}
}

// TestForwardedSpoofing checks that whatever a client writes in the header
// before the element its trusted proxy appends, the proxy's element is read
// as the proxy wrote it: a malformed element (an unterminated quote, a stray
// escape, a control byte) neither swallows what follows it nor is believed.
// The peer, 10.0.0.2, is a trusted proxy.
func TestForwardedSpoofing(t *testing.T) {
	t.Parallel()
	c := clientip.Resolver{TrustedProxies: prefixes("10.0.0.0/8", "2001:db8:ffff::/48"), ProxyHeader: clientip.Forwarded}
	xff := clientip.Resolver{TrustedProxies: c.TrustedProxies}
	tests := []struct {
		name  string
		c     clientip.Resolver
		lines []string
		want  string
	}{
		// The client's bytes run up to the proxy's ", for=...".
		{"unterminated quote, proxy appends to the line", c, []string{`for=9.9.9.9;x=", for=6.6.6.6`}, "6.6.6.6"},
		{"unterminated quote, proxy adds a line", c, []string{`for=9.9.9.9;x="`, `for=6.6.6.6`}, "6.6.6.6"},
		{"escaped quote left open", c, []string{`for=9.9.9.9;x="\", for=6.6.6.6`}, "6.6.6.6"},
		{"unterminated quote in for", c, []string{`for="9.9.9.9, for=6.6.6.6`}, "6.6.6.6"},
		{"stray quote after the client's element", c, []string{`for=9.9.9.9", for=6.6.6.6`}, "6.6.6.6"},
		{"open quote before a quoted IPv6", c, []string{`x=", for="[2001:db8::1]:4711"`}, "2001:db8::1"},
		{"open quote before two proxies", c, []string{`for=9.9.9.9;x=", for=198.51.100.9, for=10.0.0.1`}, "198.51.100.9"},
		{"trailing backslash", c, []string{`for=9.9.9.9;x=\, for=6.6.6.6`}, "6.6.6.6"},
		{"quoted comma in the client's part", c, []string{`for=9.9.9.9;x="a, for=1.1.1.1", for=6.6.6.6`}, "6.6.6.6"},
		{"control byte in the client's part", c, []string{"for=9.9.9.9;x=\"\x01, for=6.6.6.6"}, "6.6.6.6"},
		{"obs-fold in the client's part", c, []string{"for=9.9.9.9;x=\"\r\n\t, for=6.6.6.6"}, "6.6.6.6"},
		{"long open quote", c, []string{strings.Repeat(`for=9.9.9.9;x="`, 10000) + `, for=6.6.6.6`}, "6.6.6.6"},
		// Behind a trusted element, a malformed one is not believed: the
		// nearest trusted address is the client.
		{"malformed element behind a trusted one", c, []string{`for=9.9.9.9;x=", for=10.0.0.5`}, "10.0.0.5"},
		{"duplicate for behind a trusted one", c, []string{`for=9.9.9.9;for=198.51.100.1, for=10.0.0.5`}, "10.0.0.5"},
		{"element without for", c, []string{`for=9.9.9.9, proto=https`}, "10.0.0.2"},
		// Well-formed values keep their meaning.
		{"escaped quote and comma inside a value", c, []string{`for=192.0.2.1;host="a\",b;c\\", for=10.0.0.3`}, "192.0.2.1"},
		{"empty elements are skipped", c, []string{`for=198.51.100.9,, ,for=10.0.0.1`}, "198.51.100.9"},
		{"empty lines are skipped", c, []string{`for=198.51.100.9`, ``, ` `, `for=10.0.0.1`}, "198.51.100.9"},
		{"spaces around semicolons", c, []string{`for=198.51.100.9 ; proto=http`}, "198.51.100.9"},
		{"parameter names are case-insensitive", c, []string{`FOR=198.51.100.9`}, "198.51.100.9"},
		{"obfuscated port", c, []string{`for="198.51.100.9:_p1"`}, "198.51.100.9"},
		{"numeric port", c, []string{`for="198.51.100.9:8080"`}, "198.51.100.9"},
		{"zone dropped", c, []string{`for="[fe80::1%eth0]:80"`}, "fe80::1"},
		{"unquoted brackets tolerated", c, []string{`for=[2001:db8::1]:80`}, "2001:db8::1"},
		// Nodes that are not addresses stop the walk at the peer.
		{"garbage after the bracket", c, []string{`for="[2001:db8::1]junk"`}, "10.0.0.2"},
		{"port that is no port", c, []string{`for="198.51.100.9:http"`}, "10.0.0.2"},
		{"empty port", c, []string{`for="198.51.100.9:"`}, "10.0.0.2"},
		{"bracketed IPv4", c, []string{`for="[198.51.100.9]"`}, "10.0.0.2"},
		{"unknown", c, []string{`for=unknown`}, "10.0.0.2"},
		// X-Forwarded-For has no quoting; the same walk applies.
		{"XFF: quote means nothing", xff, []string{`"9.9.9.9, 6.6.6.6`}, "6.6.6.6"},
		{"XFF: empty entries are skipped", xff, []string{`198.51.100.9,,10.0.0.1`}, "198.51.100.9"},
		{"XFF: empty lines are skipped", xff, []string{`9.9.9.9`, ``, `198.51.100.9`}, "198.51.100.9"},
		{"XFF: tab", xff, []string{"198.51.100.9,\t10.0.0.1"}, "198.51.100.9"},
		{"XFF: vertical tab is not whitespace", xff, []string{"9.9.9.9,\v198.51.100.9"}, "10.0.0.2"},
		{"XFF: obs-fold", xff, []string{"9.9.9.9\r\n 6.6.6.6"}, "10.0.0.2"},
		{"XFF: empty port", xff, []string{`198.51.100.9:`}, "10.0.0.2"},
		{"XFF: port", xff, []string{`198.51.100.9:443, [2001:db8::1]:80`}, "2001:db8::1"},
		{"XFF: zone dropped", xff, []string{`fe80::1%eth0`}, "fe80::1"},
		{"XFF: long", xff, []string{strings.Repeat("9.9.9.9,", 100000) + " 6.6.6.6"}, "6.6.6.6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Resolve("10.0.0.2:80", tt.lines)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("Resolve(%q) = %s, want %s", tt.lines, got, tt.want)
			}
		})
	}
}

// TestKeyOf checks the transport-neutral form against Key, and the errors
// of a peer that is no address and of a bad prefix length.
func TestKeyOf(t *testing.T) {
	t.Parallel()
	c := clientip.Resolver{TrustedProxies: prefixes("10.0.0.0/8")}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.9, 10.0.0.1")
	want, err := c.Key(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.KeyOf(r.RemoteAddr, r.Header.Values("X-Forwarded-For")); err != nil || got != want || got != "198.51.100.9" {
		t.Errorf("KeyOf = %q, %v; Key = %q; want 198.51.100.9", got, err, want)
	}
	if _, err := c.KeyOf("@", nil); err == nil {
		t.Error("KeyOf of a Unix socket peer: no error")
	}
	if _, err := (clientip.Resolver{IPv4PrefixLen: 40}).KeyOf("192.0.2.1:1", nil); err == nil {
		t.Error("KeyOf with IPv4PrefixLen 40: no error")
	}
	for _, c := range []clientip.Resolver{
		{TrustedProxies: []netip.Prefix{{}}},
		{IPv4PrefixLen: 33},
		{IPv4PrefixLen: -1},
		{IPv6PrefixLen: 129},
		{ProxyHeader: 7},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v): no error", c)
		}
	}
}
