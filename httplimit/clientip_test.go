package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/httplimit"
)

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestClientIPErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []clientip.Resolver{
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
	// So is an unvalidated Resolver with a bad prefix length.
	r.RemoteAddr = "192.0.2.1:1"
	if _, err := (clientip.Resolver{IPv4PrefixLen: 40}).Key(r); err == nil {
		t.Error("Key with IPv4PrefixLen 40: no error")
	}
}

// TestForgedForwardedFor checks on a real server that a client which is not
// a trusted proxy cannot pick its bucket with X-Forwarded-For, and that
// behind a trusted proxy the right-most untrusted hop is the bucket.
func TestForgedForwardedFor(t *testing.T) {
	t.Parallel()
	limit := redlimit.PerMinute(3)
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			untrusted, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: prefixes("10.0.0.0/8")})
			if err != nil {
				t.Fatal(err)
			}
			trusted, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: prefixes("127.0.0.0/8", "::1/128")})
			if err != nil {
				t.Fatal(err)
			}
			forwarded, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: prefixes("127.0.0.0/8", "::1/128"), ProxyHeader: clientip.Forwarded})
			if err != nil {
				t.Fatal(err)
			}
			direct := serve(t, mustNew(t, st.lim, httplimit.Options{}, httplimit.Rule{Name: "direct", Limit: limit, Key: untrusted}).Handle(okHandler()))
			proxied := serve(t, mustNew(t, st.lim, httplimit.Options{}, httplimit.Rule{Name: "proxied", Limit: limit, Key: trusted}).Handle(okHandler()))
			fwd := serve(t, mustNew(t, st.lim, httplimit.Options{}, httplimit.Rule{Name: "fwd", Limit: limit, Key: forwarded}).Handle(okHandler()))

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
				if got := st.lim.peek(t, key, limit).Remaining; got != want {
					t.Errorf("remaining of %q after one more: %d, want %d", key, got, want)
				}
			}
		})
	}
}

func TestIPKeyCopiesProxies(t *testing.T) {
	t.Parallel()
	ps := prefixes("10.0.0.0/8")
	kf, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: ps})
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
