package grpclimit_test

import (
	"context"
	"net/netip"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memory"
)

// TestPeerIPForwardedSpoofing checks on a real gRPC server, whose client on
// 127.0.0.1 plays the trusted proxy, that what a client writes in the
// forwarding metadata before the proxy's element cannot choose its key: an
// unterminated quote does not swallow the proxy's element, and a malformed
// element is not believed.
func TestPeerIPForwardedSpoofing(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	fwd, err := grpclimit.PeerIP(clientip.Resolver{TrustedProxies: loopback, ProxyHeader: clientip.Forwarded})
	if err != nil {
		t.Fatal(err)
	}
	xff, err := grpclimit.PeerIP(clientip.Resolver{TrustedProxies: loopback})
	if err != nil {
		t.Fatal(err)
	}
	limit := redlimit.PerMinute(1000)
	in := mustNew(t, lim, grpclimit.Options{},
		grpclimit.Rule{Name: "fwd", Limit: limit, Key: fwd},
		grpclimit.Rule{Name: "xff", Limit: limit, Key: xff})
	client, _ := serve(t, in)
	tests := []struct {
		name string
		md   []string // key, value, ...
		want string   // the limiter key the call counts under
	}{
		{"unterminated quote, proxy appends to the value",
			[]string{"forwarded", `for=9.9.9.9;x=", for=6.6.6.6`}, "fwd:6.6.6.6"},
		{"unterminated quote, proxy adds a value",
			[]string{"forwarded", `for=9.9.9.9;x="`, "forwarded", "for=6.6.6.6"}, "fwd:6.6.6.6"},
		{"escaped quote left open",
			[]string{"forwarded", `for=9.9.9.9;x="\", for=6.6.6.6`}, "fwd:6.6.6.6"},
		{"open quote before a quoted IPv6",
			[]string{"forwarded", `x=", for="[2001:db8::1]:4711"`}, "fwd:2001:db8::/64"},
		{"malformed element behind a trusted one",
			[]string{"forwarded", `for=9.9.9.9;x=", for=10.0.0.5`}, "fwd:10.0.0.5"},
		{"unterminated quote in for",
			[]string{"forwarded", `for="9.9.9.9, for=6.6.6.7`}, "fwd:6.6.6.7"},
		{"x-forwarded-for: empty entries are skipped",
			[]string{"x-forwarded-for", "198.51.100.9,,10.0.0.1"}, "xff:198.51.100.9"},
		{"x-forwarded-for: quote means nothing",
			[]string{"x-forwarded-for", `"9.9.9.9, 6.6.6.8`}, "xff:6.6.6.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := lim.Peek(context.Background(), tt.want, limit, 1)
			if err != nil {
				t.Fatal(err)
			}
			ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), tt.md...)
			if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			after, err := lim.Peek(context.Background(), tt.want, limit, 1)
			if err != nil {
				t.Fatal(err)
			}
			if after.Remaining != before.Remaining-1 {
				t.Errorf("metadata %q: %s not counted (remaining %d, then %d)", tt.md, tt.want, before.Remaining, after.Remaining)
			}
		})
	}
}
