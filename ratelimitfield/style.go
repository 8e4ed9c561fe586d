package ratelimitfield

import (
	"fmt"
	"strings"
)

// Style selects the rate-limit fields a response carries. The zero value,
// All, selects the draft's fields and the X-RateLimit-* fields.
type Style uint8

const (
	// All selects RateLimit-Policy and RateLimit, and X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset.
	All Style = iota
	// Draft selects RateLimit-Policy and RateLimit only, as
	// draft-ietf-httpapi-ratelimit-headers-10 defines them:
	//
	//	RateLimit-Policy: "per_ip";q=100;w=60
	//	RateLimit: "per_ip";r=42;t=17
	Draft
	// X selects X-RateLimit-Limit (the most cost that can pass at once:
	// the count, or a token bucket's burst), X-RateLimit-Remaining and
	// X-RateLimit-Reset only.
	X
	// None selects no field.
	None
	// Envoy selects RateLimit-Limit (requests per period),
	// RateLimit-Remaining and RateLimit-Reset, the names and meaning
	// envoyproxy/ratelimit uses.
	Envoy
)

var styleNames = [...]string{All: "all", Draft: "draft", X: "x-ratelimit", None: "none", Envoy: "envoy"}

// String returns the style's name: "all", "draft", "x-ratelimit", "envoy"
// or "none".
func (s Style) String() string {
	if s.Valid() {
		return styleNames[s]
	}
	return fmt.Sprintf("Style(%d)", uint8(s))
}

// Valid reports whether s is one of the five styles.
func (s Style) Valid() bool { return s <= Envoy }

// ParseStyle returns the style named s, ignoring case: a name [Style.String]
// returns, or "ietf" and "draft-10" for Draft, "x" for X, "off" for None.
func ParseStyle(s string) (Style, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all":
		return All, nil
	case "draft", "ietf", "draft-10":
		return Draft, nil
	case "x-ratelimit", "x":
		return X, nil
	case "envoy":
		return Envoy, nil
	case "none", "off":
		return None, nil
	}
	return 0, fmt.Errorf("ratelimitfield: unknown style %q (want all, ietf, x-ratelimit, envoy or none)", s)
}

// draft reports whether s selects RateLimit-Policy and RateLimit.
func (s Style) draft() bool { return s == All || s == Draft }

// x reports whether s selects the X-RateLimit-* fields.
func (s Style) x() bool { return s == All || s == X }
