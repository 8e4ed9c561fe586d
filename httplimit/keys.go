package httplimit

import (
	"context"
	"fmt"
	"net/http"

	"github.com/redlimit/redlimit/internal/ruleset"
)

// A KeyFunc returns the key a rule counts a request under: requests with the
// same key share one allowance. It returns an error wrapping [ErrNoKey] when
// the rule does not apply to the request (a missing header, no user); the
// rule is then skipped for that request. Any other error, or a panic, stops
// the request (see [Options].OnError). A shadow rule's error is logged and
// skips the rule instead. A KeyFunc must be safe for concurrent use.
type KeyFunc func(*http.Request) (string, error)

// Header returns a KeyFunc that keys requests by the value of the named
// header, such as an API key. A request without the header, or with an empty
// value, has no key ([ErrNoKey]): the rule is skipped, unless [Or] gives a
// fallback. Wrap it in [Hashed] to keep secrets out of the store and the logs.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%w: no %s header", ErrNoKey, name)
	}
}

// WithUser returns a copy of ctx that carries the authenticated user's id,
// for [User] to key by (and grpclimit.User: the two share it).
// Authentication middleware calls it before the rate limiter runs:
//
//	next.ServeHTTP(w, r.WithContext(httplimit.WithUser(r.Context(), id)))
func WithUser(ctx context.Context, id string) context.Context { return ruleset.WithUser(ctx, id) }

// UserFrom returns the user id that [WithUser] put in ctx, and whether there
// is a non-empty one.
func UserFrom(ctx context.Context) (string, bool) { return ruleset.UserFrom(ctx) }

// User keys requests by the authenticated user that [WithUser] put in the
// request's context. A request without one has no key ([ErrNoKey]).
func User(r *http.Request) (string, error) {
	if id, ok := UserFrom(r.Context()); ok {
		return id, nil
	}
	return "", fmt.Errorf("%w: no authenticated user", ErrNoKey)
}

// Route keys requests by their route: the pattern that an [http.ServeMux]
// matched (Request.Pattern, such as "GET /items/{id}"). It is set when the
// middleware wraps a handler registered on the mux. Otherwise Route falls
// back to the method and the path ("GET /items/42"). That gives every path
// its own key. That happens when the middleware wraps the whole mux; use
// [MuxRoute] there instead.
func Route(r *http.Request) (string, error) {
	if r.Pattern != "" {
		return r.Pattern, nil
	}
	return r.Method + " " + r.URL.Path, nil
}

// MuxRoute returns a KeyFunc that keys requests by the pattern mux routes
// them to. It suits a middleware that wraps the whole mux, and so runs
// before the mux has set Request.Pattern. A request that matches no
// pattern has no key ([ErrNoKey]).
func MuxRoute(mux *http.ServeMux) KeyFunc {
	return func(r *http.Request) (string, error) {
		if r.Pattern != "" {
			return r.Pattern, nil
		}
		if _, p := mux.Handler(r); p != "" {
			return p, nil
		}
		return "", fmt.Errorf("%w: no route matches %s %s", ErrNoKey, r.Method, r.URL.Path)
	}
}

// Static returns a KeyFunc that gives every request the same key: one
// allowance shared by all, such as a global limit, or a fallback for [Or].
func Static(key string) KeyFunc {
	return func(*http.Request) (string, error) { return key, nil }
}

// Compose returns a KeyFunc whose key is made of the keys of all of keys, in
// order, such as a client IP and a route. The parts are joined by '|' with
// each part's '%' and '|' percent-escaped, so no choice of parts can forge
// another combination. If any part has no key, the composition has none.
func Compose(keys ...KeyFunc) KeyFunc { return ruleset.Compose(keys...) }

// Or returns a KeyFunc that uses the first of keys that has a key for the
// request. Or(Header("X-API-Key"), RemoteIP) keys by API key, or by client
// IP when there is none. Each key is prefixed by the position of the
// KeyFunc that made it ("0:", "1:", ...). So a client cannot use one kind
// of key to reach the allowance of another: an API key spelling someone's
// IP.
// Errors other than [ErrNoKey] are returned at once. If none has a key, Or
// has none.
func Or(keys ...KeyFunc) KeyFunc { return ruleset.Or(keys...) }

// Hashed returns a KeyFunc whose key is the first 128 bits of the SHA-256
// of key's, in hex. It is fixed in size. Neither the store nor the logs
// see the original (an API key, a token).
func Hashed(key KeyFunc) KeyFunc { return ruleset.Hashed(key) }
