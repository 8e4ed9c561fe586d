package httplimit

import (
	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// The rate-limit fields are package ratelimitfield's, shared with grpclimit,
// the rate limit service and backoff; these names are theirs.

// Names of the header fields the middleware sets.
const (
	HeaderRateLimitPolicy     = ratelimitfield.HeaderRateLimitPolicy
	HeaderRateLimit           = ratelimitfield.HeaderRateLimit
	HeaderXRateLimitLimit     = ratelimitfield.HeaderXRateLimitLimit
	HeaderXRateLimitRemaining = ratelimitfield.HeaderXRateLimitRemaining
	HeaderXRateLimitReset     = ratelimitfield.HeaderXRateLimitReset
	HeaderRetryAfter          = ratelimitfield.HeaderRetryAfter
)

// Headers selects the rate-limit header fields set on every response: it is
// [ratelimitfield.Style], whose zero value, AllHeaders, sets both the
// draft's fields and the X-RateLimit-* fields. Retry-After is set on every
// denial that can be retried whatever the selection.
type Headers = ratelimitfield.Style

// The selections of [Headers]; ratelimitfield.Envoy is a fifth.
const (
	// AllHeaders sets the draft fields and the X-RateLimit-* fields.
	AllHeaders = ratelimitfield.All
	// DraftHeaders sets RateLimit-Policy and RateLimit only.
	DraftHeaders = ratelimitfield.Draft
	// XHeaders sets X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset only.
	XHeaders = ratelimitfield.X
	// NoHeaders sets none.
	NoHeaders = ratelimitfield.None
)

// QuotaPolicy is one item of a RateLimit-Policy field.
//
// Deprecated: use [ratelimitfield.QuotaPolicy], which it is.
type QuotaPolicy = ratelimitfield.QuotaPolicy

// ServiceLimit is one item of a RateLimit field.
//
// Deprecated: use [ratelimitfield.ServiceLimit], which it is.
type ServiceLimit = ratelimitfield.ServiceLimit

// PolicyOf returns the quota policy that describes limit l under the given name.
//
// Deprecated: use [ratelimitfield.PolicyOf].
func PolicyOf(name string, l redlimit.Limit) QuotaPolicy { return ratelimitfield.PolicyOf(name, l) }

// ServiceLimitOf returns the service limit that describes res under the given name.
//
// Deprecated: use [ratelimitfield.ServiceLimitOf].
func ServiceLimitOf(name string, res redlimit.Result) ServiceLimit {
	return ratelimitfield.ServiceLimitOf(name, res)
}

// ParseRateLimitPolicy parses the lines of a RateLimit-Policy field.
//
// Deprecated: use [ratelimitfield.ParseRateLimitPolicy].
func ParseRateLimitPolicy(lines []string) ([]QuotaPolicy, error) {
	return ratelimitfield.ParseRateLimitPolicy(lines)
}

// ParseRateLimit parses the lines of a RateLimit field.
//
// Deprecated: use [ratelimitfield.ParseRateLimit].
func ParseRateLimit(lines []string) ([]ServiceLimit, error) {
	return ratelimitfield.ParseRateLimit(lines)
}
