package httplimit

import (
	"net/netip"

	"github.com/redlimit/redlimit/clientip"
)

// ClientIP finds the network of the client that sent a request, without
// letting the client choose it: the remote address, or behind trusted
// proxies the right-most address of the forwarding header that no trusted
// proxy wrote. It is [clientip.Resolver], which grpclimit shares; its Key
// method is a [KeyFunc].
type ClientIP = clientip.Resolver

// ProxyHeader names the header in which trusted proxies record the
// addresses a request came from: [XForwardedFor] or [Forwarded].
type ProxyHeader = clientip.ProxyHeader

// The forwarding headers a [ClientIP] reads.
const (
	XForwardedFor = clientip.XForwardedFor
	Forwarded     = clientip.Forwarded
)

// RemoteIP keys requests by the network of their remote address, trusting
// no forwarding header: [ClientIP]{}.Key.
var RemoteIP KeyFunc = ClientIP{}.Key

// IPKey returns c.Key after checking c with [clientip.Resolver.Validate].
func IPKey(c ClientIP) (KeyFunc, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...) // callers may reuse their slice
	return c.Key, nil
}
