package rls

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/redlimit/redlimit"
)

// Defaults of [Options]: the caps on one request.
const (
	// DefaultMaxDescriptors is the most descriptors one request may hold,
	// and the most Options.MaxDescriptors may be: every limited descriptor is
	// one limit of one redlimit.Limiter.AllowAll call, which takes at most
	// redlimit.MaxRequests.
	DefaultMaxDescriptors = redlimit.MaxRequests
	// DefaultMaxEntries is the most entries one descriptor may hold.
	DefaultMaxEntries = 32
	// DefaultMaxBytes is the most bytes the domain, keys and values of one
	// request may hold together.
	DefaultMaxBytes = 64 << 10
	// DefaultMaxDetailedSeries bounds how many distinct rule labels the
	// detailed_metric rules may add to the metrics; past it, a detailed
	// rule is labelled by its path, as if it were not detailed.
	DefaultMaxDetailedSeries = 1000
)

// Headers selects the rate-limit header fields the service asks Envoy to add
// to the response (RateLimitResponse.response_headers_to_add), from the
// enforced limit closest to running out. Shadow limits never show in them.
type Headers uint8

const (
	// HeadersOff, the zero value, adds no header fields.
	HeadersOff Headers = iota
	// HeadersIETF adds RateLimit-Policy and RateLimit as
	// draft-ietf-httpapi-ratelimit-headers-10 defines them:
	//
	//	RateLimit-Policy: "per_ip";q=100;w=60
	//	RateLimit: "per_ip";r=42;t=17
	HeadersIETF
	// HeadersXRateLimit adds X-RateLimit-Limit (the most cost that can pass
	// at once: the count, or a token bucket's burst), X-RateLimit-Remaining
	// and X-RateLimit-Reset (seconds), as the httplimit middleware does.
	HeadersXRateLimit
	// HeadersEnvoy adds RateLimit-Limit (requests per unit),
	// RateLimit-Remaining and RateLimit-Reset (seconds), the names and
	// meaning envoyproxy/ratelimit uses.
	HeadersEnvoy
)

var headerNames = [...]string{"off", "ietf", "x-ratelimit", "envoy"}

// String returns the selection's flag value: "off", "ietf", "x-ratelimit"
// or "envoy".
func (h Headers) String() string {
	if int(h) < len(headerNames) {
		return headerNames[h]
	}
	return fmt.Sprintf("Headers(%d)", uint8(h))
}

// ParseHeaders returns the selection named s: "ietf", "x-ratelimit" or
// "envoy"; "true" and "on" mean ietf; "", "false" and "off" mean none.
func ParseHeaders(s string) (Headers, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "false", "none":
		return HeadersOff, nil
	case "ietf", "true", "on", "draft", "draft-10":
		return HeadersIETF, nil
	case "x-ratelimit", "x":
		return HeadersXRateLimit, nil
	case "envoy":
		return HeadersEnvoy, nil
	}
	return 0, fmt.Errorf("rls: unknown response headers %q (want ietf, x-ratelimit, envoy or off)", s)
}

// Options configure a [Service]. The zero value of each field but Limiter
// is its default.
type Options struct {
	// Limiter decides the limits: normally a resilient.Limiter in front of
	// a redisstore.Store, or a memory.Store. Required.
	Limiter redlimit.Limiter
	// Shadow puts every rule in shadow mode: decided and counted, never
	// denied (the --shadow flag).
	Shadow bool
	// Headers selects the response header fields (default none).
	Headers Headers
	// MaxDescriptors caps the descriptors of one request
	// (default and maximum [DefaultMaxDescriptors]).
	MaxDescriptors int
	// MaxEntries caps the entries of one descriptor (default [DefaultMaxEntries]).
	MaxEntries int
	// MaxBytes caps the bytes of the domain, keys and values of one request
	// together (default [DefaultMaxBytes]).
	MaxBytes int
	// MaxDetailedSeries bounds the rule labels detailed_metric rules add
	// (default [DefaultMaxDetailedSeries]; negative: detailed_metric is
	// ignored).
	MaxDetailedSeries int
	// DefaultAlgorithm counts a descriptor's limit override when no rule
	// of the configuration matches the descriptor (default
	// [redlimit.SlidingWindow]); when one matches, the override is counted
	// by the rule's algorithm.
	DefaultAlgorithm redlimit.Algorithm
	// Observer receives every decision, for metrics (default: none).
	Observer Observer
	// Logger receives errors the caller does not see (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults returns o with its defaults filled in, or an error naming
// the first bad field.
func (o Options) withDefaults() (Options, error) {
	if o.Limiter == nil {
		return o, fmt.Errorf("rls: Options.Limiter is nil")
	}
	if o.Headers > HeadersEnvoy {
		return o, fmt.Errorf("rls: unknown Options.Headers %d", o.Headers)
	}
	if o.MaxDescriptors < 0 || o.MaxEntries < 0 || o.MaxBytes < 0 {
		return o, fmt.Errorf("rls: negative cap in Options")
	}
	if o.MaxDescriptors > DefaultMaxDescriptors {
		return o, fmt.Errorf("rls: Options.MaxDescriptors %d is above %d, the most limits one decision takes", o.MaxDescriptors, DefaultMaxDescriptors)
	}
	if o.DefaultAlgorithm != 0 && !o.DefaultAlgorithm.Valid() {
		return o, fmt.Errorf("rls: Options.DefaultAlgorithm: %w", redlimit.ErrUnknownAlgorithm)
	}
	if o.MaxDescriptors == 0 {
		o.MaxDescriptors = DefaultMaxDescriptors
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDetailedSeries == 0 {
		o.MaxDetailedSeries = DefaultMaxDetailedSeries
	}
	if o.DefaultAlgorithm == 0 {
		o.DefaultAlgorithm = redlimit.SlidingWindow
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}
