package grpclimit

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/internal/ruleset"
)

// A KeyFunc returns the key a rule counts a call under. It reads the
// call's context (peer, incoming metadata, values set by earlier
// interceptors) and its full method name ("/pkg.Service/Method"). It
// returns an error wrapping [ErrNoKey] when the rule does not apply to the
// call. Any other error, or a panic, refuses the call with
// codes.InvalidArgument. A shadow rule's error is logged and skips the
// rule instead: a shadow rule never refuses a call. A KeyFunc must be
// safe for concurrent use.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// PeerIP returns a KeyFunc that keys calls by the network of the client,
// as c finds it (see [clientip.Resolver]). That is the peer's address.
// When the peer is a trusted proxy, it is the right-most untrusted address
// of the c.ProxyHeader metadata ("x-forwarded-for" or "forwarded"). IPv6
// clients are grouped by /64 by default. It reports an error if c is not
// valid.
func PeerIP(c clientip.Resolver) (KeyFunc, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...)
	return peerIP(c), nil
}

// RemoteIP keys calls by the network of their peer's address, trusting no
// forwarding metadata, as PeerIP(clientip.Resolver{}) does.
func RemoteIP(ctx context.Context, method string) (string, error) {
	return remoteIP(ctx, method)
}

var remoteIP = peerIP(clientip.Resolver{})

// peerIP returns the KeyFunc of PeerIP for a valid c.
func peerIP(c clientip.Resolver) KeyFunc {
	header := strings.ToLower(c.ProxyHeader.String())
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", fmt.Errorf("grpclimit: no peer in the call's context")
		}
		var hops []string
		if len(c.TrustedProxies) > 0 {
			md, _ := metadata.FromIncomingContext(ctx)
			hops = md.Get(header)
		}
		return c.KeyOf(p.Addr.String(), hops)
	}
}

// Metadata returns a KeyFunc that keys calls by the first non-empty value of
// the named incoming metadata key, such as an API key. A call without one
// has no key ([ErrNoKey]). Wrap it in [Hashed] to keep secrets out of the
// store and the logs.
func Metadata(key string) KeyFunc {
	key = strings.ToLower(key)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get(key) {
			if v != "" {
				return v, nil
			}
		}
		return "", fmt.Errorf("%w: no %s metadata", ErrNoKey, key)
	}
}

// Method keys calls by their full method name, "/pkg.Service/Method".
func Method(_ context.Context, fullMethod string) (string, error) {
	return fullMethod, nil
}

// WithUser returns a copy of ctx that carries the authenticated user's id,
// for [User] to key by; an authentication interceptor calls it. httplimit's
// WithUser and User share it.
func WithUser(ctx context.Context, id string) context.Context {
	return ruleset.WithUser(ctx, id)
}

// User keys calls by the authenticated user that [WithUser] put in the
// context. A call without one has no key ([ErrNoKey]).
func User(ctx context.Context, _ string) (string, error) {
	if id, ok := ruleset.UserFrom(ctx); ok {
		return id, nil
	}
	return "", fmt.Errorf("%w: no authenticated user", ErrNoKey)
}

// Static returns a KeyFunc that gives every call the same key.
func Static(key string) KeyFunc {
	return func(context.Context, string) (string, error) { return key, nil }
}

// Compose returns a KeyFunc whose key is made of the keys of all of keys,
// in order, joined by '|'. Each part's '%' and '|' are percent-escaped. So
// no choice of parts can forge another combination. If any part has no
// key, the composition has none.
func Compose(keys ...KeyFunc) KeyFunc { return fromCall(ruleset.Compose(ofCalls(keys)...)) }

// Or returns a KeyFunc that uses the first of keys that has a key for the
// call. The key is prefixed by its position ("0:", "1:", ...), so one kind
// of key cannot reach the allowance of another. If none has a key, Or has
// none.
func Or(keys ...KeyFunc) KeyFunc { return fromCall(ruleset.Or(ofCalls(keys)...)) }

// Hashed returns a KeyFunc whose key is the first 128 bits of the SHA-256 of
// key's, in hex, as [httplimit.Hashed].
func Hashed(key KeyFunc) KeyFunc { return fromCall(ruleset.Hashed(key.ofCall())) }

// call is what a KeyFunc reads, as the one request value of the rule engine.
type call struct {
	ctx    context.Context
	method string // the full method name
	req    any    // the request message of a unary call; nil for a stream
}

// ofCall returns k as a key function of a call; nil for nil.
func (k KeyFunc) ofCall() func(call) (string, error) {
	if k == nil {
		return nil
	}
	return func(c call) (string, error) { return k(c.ctx, c.method) }
}

// ofCalls returns keys as key functions of a call.
func ofCalls(keys []KeyFunc) []func(call) (string, error) {
	out := make([]func(call) (string, error), len(keys))
	for i, k := range keys {
		out[i] = k.ofCall()
	}
	return out
}

// fromCall returns the KeyFunc of a key function of a call.
func fromCall(f func(call) (string, error)) KeyFunc {
	return func(ctx context.Context, method string) (string, error) { return f(call{ctx: ctx, method: method}) }
}
