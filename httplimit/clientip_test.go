package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestClientIPKey(t *testing.T) {
	t.Parallel()
	proxies := prefixes("10.0.0.0/8", "2001:db8:ffff::/48")
	tests := []struct {
		name   string
		c      httplimit.ClientIP
		remote string
		header map[string][]string
		want   string
	}{
		{name: "remote only", remote: "192.0.2.7:1234", want: "192.0.2.7"},
		{name: "remote without port", remote: "192.0.2.7", want: "192.0.2.7"},
		{name: "forged XFF from an untrusted peer", remote: "192.0.2.7:1234",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "192.0.2.7"},
		{name: "forged XFF, no proxies configured", c: httplimit.ClientIP{}, remote: "10.1.1.1:1",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, want: "10.1.1.1"},
		{name: "trusted proxy: right-most untrusted hop", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9, 10.0.0.1"}}, want: "198.51.100.9"},
		{name: "trusted proxy: several header lines in order", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.9", "10.0.0.7"}}, want: "198.51.100.9"},
		{name: "trusted proxy: garbage left of the client is ignored", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"not-an-ip, 198.51.100.9"}}, want: "198.51.100.9"},
		{name: "trusted proxy: unparsable hop falls back to the nearest trusted", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9, unknown, 10.0.0.1"}}, want: "10.0.0.1"},
		{name: "trusted proxy: every hop trusted takes the left-most", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"10.9.9.9, 10.0.0.1"}}, want: "10.9.9.9"},
		{name: "trusted proxy without header", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80", want: "10.0.0.2"},
		{name: "trusted proxy: XFF with ports and brackets", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9:5555"}}, want: "198.51.100.9"},
		{name: "trusted proxy: XFF IPv6 grouped by /64", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"X-Forwarded-For": {"[2001:db8:1:2:3:4:5:6]:443"}}, want: "2001:db8:1:2::/64"},
		{name: "Forwarded is ignored when XFF is configured", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {"for=198.51.100.9"}}, want: "10.0.0.2"},
		{name: "Forwarded: quoted IPv6 with port", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for="[2001:db8::1]:4711";proto=https, for=10.0.0.1`}}, want: "2001:db8::/64"},
		{name: "Forwarded: case, spaces, several pairs", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`For=192.0.2.60;proto=http;by=203.0.113.43`, `for=198.51.100.17; by="[2001:db8:ffff::1]"`}}, want: "198.51.100.17"},
		{name: "Forwarded: quoted comma stays in its element", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=192.0.2.1;host="a,b", for="10.0.0.3:99"`}}, want: "192.0.2.1"},
		{name: "Forwarded: unknown falls back to the nearest trusted", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=unknown, for="[2001:db8:ffff::9]"`}}, want: "2001:db8:ffff::/64"},
		{name: "Forwarded: obfuscated identifier", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for=_hidden`}}, want: "10.0.0.2"},
		{name: "Forwarded: unbracketed IPv6 is invalid", c: httplimit.ClientIP{TrustedProxies: proxies, ProxyHeader: httplimit.Forwarded}, remote: "10.0.0.2:80",
			header: map[string][]string{"Forwarded": {`for="2001:db8::1"`}}, want: "10.0.0.2"},
		{name: "IPv6 remote grouped by /64", remote: "[2001:db8:aa:bb:1::1]:9", want: "2001:db8:aa:bb::/64"},
		{name: "IPv6 zone dropped", remote: "[fe80::1%eth0]:9", want: "fe80::/64"},
		{name: "IPv6 /48", c: httplimit.ClientIP{IPv6PrefixLen: 48}, remote: "[2001:db8:aa:bb::1]:9", want: "2001:db8:aa::/48"},
		{name: "IPv6 /128", c: httplimit.ClientIP{IPv6PrefixLen: 128}, remote: "[2001:db8::1]:9", want: "2001:db8::1"},
		{name: "IPv4 /24", c: httplimit.ClientIP{IPv4PrefixLen: 24}, remote: "192.0.2.77:9", want: "192.0.2.0/24"},
		{name: "IPv4-mapped IPv6 is IPv4", remote: "[::ffff:192.0.2.7]:9", want: "192.0.2.7"},
		{name: "IPv4-mapped trusted proxy", c: httplimit.ClientIP{TrustedProxies: prefixes("::ffff:10.0.0.0/104")}, remote: "10.0.0.2:1",
			header: map[string][]string{"X-Forwarded-For": {"198.51.100.9"}}, want: "198.51.100.9"},
		{name: "IPv4-mapped hop", c: httplimit.ClientIP{TrustedProxies: proxies}, remote: "[::ffff:10.0.0.2]:1",
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
			kf, err := httplimit.IPKey(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := kf(r)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("key %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClientIPErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []httplimit.ClientIP{
		{TrustedProxies: []netip.Prefix{{}}},
		{IPv4PrefixLen: 33},
		{IPv4PrefixLen: -1},
		{IPv6PrefixLen: 129},
		{ProxyHeader: 7},
	} {
		if _, err := httplimit.IPKey(c); err == nil {
			t.Errorf("IPKey(%+v): no error", c)
		}
	}
	// A remote address that is no IP (a Unix socket) is an error, not a panic.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "@"
	if _, err := httplimit.RemoteIP(r); err == nil {
		t.Error("RemoteIP of a Unix socket peer: no error")
	}
	// So is an unvalidated ClientIP with a bad prefix length.
	r.RemoteAddr = "192.0.2.1:1"
	if _, err := (httplimit.ClientIP{IPv4PrefixLen: 40}).Key(r); err == nil {
		t.Error("Key with IPv4PrefixLen 40: no error")
	}
}

// TestForgedForwardedFor checks on a real server that a client which is not
// a trusted proxy cannot pick its bucket with X-Forwarded-For, and that
// behind a trusted proxy the right-most untrusted hop is the bucket.
func TestForgedForwardedFor(t *testing.T) {
	t.Parallel()
	limit := redlimit.PerMinute(3)
	for _, b := range backends(t, fixedNow()) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			untrusted, err := httplimit.IPKey(httplimit.ClientIP{TrustedProxies: prefixes("10.0.0.0/8")})
			if err != nil {
				t.Fatal(err)
			}
			trusted, err := httplimit.IPKey(httplimit.ClientIP{TrustedProxies: prefixes("127.0.0.0/8", "::1/128")})
			if err != nil {
				t.Fatal(err)
			}
			forwarded, err := httplimit.IPKey(httplimit.ClientIP{TrustedProxies: prefixes("127.0.0.0/8", "::1/128"), ProxyHeader: httplimit.Forwarded})
			if err != nil {
				t.Fatal(err)
			}
			direct := serve(t, mustNew(t, b.lim, httplimit.Options{}, httplimit.Rule{Name: "direct", Limit: limit, Key: untrusted}).Handle(okHandler()))
			proxied := serve(t, mustNew(t, b.lim, httplimit.Options{}, httplimit.Rule{Name: "proxied", Limit: limit, Key: trusted}).Handle(okHandler()))
			fwd := serve(t, mustNew(t, b.lim, httplimit.Options{}, httplimit.Rule{Name: "fwd", Limit: limit, Key: forwarded}).Handle(okHandler()))

			// Untrusted peer: every forged address lands in 127.0.0.1's bucket.
			for i, xff := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3, 10.0.0.1", "198.51.100.4"} {
				resp, _ := get(t, direct.URL, "X-Forwarded-For", xff)
				want := http.StatusOK
				if i == 3 {
					want = http.StatusTooManyRequests
				}
				if resp.StatusCode != want {
					t.Fatalf("direct request %d with X-Forwarded-For %q: status %d, want %d", i+1, xff, resp.StatusCode, want)
				}
			}

			// Trusted peer: the right-most untrusted hop is the bucket, so a
			// client forging the left part still counts as itself.
			for i := range 3 {
				forged := []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"}[i]
				if resp, _ := get(t, proxied.URL, "X-Forwarded-For", forged+", 198.51.100.50"); resp.StatusCode != http.StatusOK {
					t.Fatalf("proxied request %d: status %d", i+1, resp.StatusCode)
				}
			}
			if resp, _ := get(t, proxied.URL, "X-Forwarded-For", "203.0.113.4, 198.51.100.50"); resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("4th proxied request from 198.51.100.50: status %d, want 429", resp.StatusCode)
			}
			if resp, _ := get(t, proxied.URL, "X-Forwarded-For", "198.51.100.51"); resp.StatusCode != http.StatusOK {
				t.Fatalf("another client behind the proxy: status %d, want 200", resp.StatusCode)
			}

			// Forwarded, with IPv6 clients grouped by /64: two addresses
			// of one /64 share a bucket, another /64 has its own.
			for i, f := range []string{`for="[2001:db8:0:1::a]:4711"`, `for="[2001:db8:0:1::b]"`, `for="[2001:db8:0:1:ffff::1]:1", for=127.0.0.1`} {
				if resp, _ := get(t, fwd.URL, "Forwarded", f); resp.StatusCode != http.StatusOK {
					t.Fatalf("forwarded request %d: status %d", i+1, resp.StatusCode)
				}
			}
			resp, _ := get(t, fwd.URL, "Forwarded", `for="[2001:db8:0:1::c]"`)
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("4th request from 2001:db8:0:1::/64: status %d, want 429", resp.StatusCode)
			}
			if resp, _ := get(t, fwd.URL, "Forwarded", `for="[2001:db8:0:2::a]"`); resp.StatusCode != http.StatusOK {
				t.Fatalf("a request from 2001:db8:0:2::/64: status %d, want 200", resp.StatusCode)
			}

			// The buckets are the ones described, under each rule's name.
			// Peek shows what would remain after one more request.
			for key, want := range map[string]int64{
				"direct:127.0.0.1":         0,
				"proxied:198.51.100.50":    0,
				"proxied:198.51.100.51":    1,
				"fwd:2001:db8:0:1::/64":    0,
				"fwd:2001:db8:0:2::/64":    1,
				"proxied:203.0.113.1":      2, // untouched
				"direct:198.51.100.1":      2,
				"fwd:2001:db8:0:1::a":      2,
				"proxied:127.0.0.1":        2,
				"fwd:2001:db8:0:1:ffff::1": 2,
			} {
				if got := b.lim.peek(t, key, limit).Remaining; got != want {
					t.Errorf("remaining of %q after one more: %d, want %d", key, got, want)
				}
			}
		})
	}
}

func TestIPKeyCopiesProxies(t *testing.T) {
	t.Parallel()
	ps := prefixes("10.0.0.0/8")
	kf, err := httplimit.IPKey(httplimit.ClientIP{TrustedProxies: ps})
	if err != nil {
		t.Fatal(err)
	}
	ps[0] = netip.MustParsePrefix("192.0.2.0/24")
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	if got, err := kf(r); err != nil || got != "198.51.100.1" {
		t.Errorf("key %q, %v; want 198.51.100.1", got, err)
	}
	if errors.Is(err, httplimit.ErrNoKey) {
		t.Error("unexpected ErrNoKey")
	}
}
