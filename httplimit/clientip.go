package httplimit

import (
	"net/netip"

	"github.com/redlimit/redlimit/clientip"
)

// RemoteIP keys requests by the network of their remote address, trusting
// no forwarding header: [clientip.Resolver]{}.Key.
var RemoteIP KeyFunc = clientip.Resolver{}.Key

// IPKey returns c.Key after checking c with [clientip.Resolver.Validate].
// The resolver finds the client's network without letting the client
// choose it (see package clientip).
func IPKey(c clientip.Resolver) (KeyFunc, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...) // callers may reuse their slice
	return c.Key, nil
}
