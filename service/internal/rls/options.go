package rls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"golang.org/x/net/http/httpguts"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
	"github.com/redlimit/redlimit/service/internal/config"
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
	// DefaultMaxDetailedSeries bounds how many rule labels the
	// detailed_metric rules may hold at once in the metrics. A descriptor
	// whose label holds none is labelled by its rule's path, as if it were
	// not detailed. "Metrics" in the package documentation says which
	// labels hold one.
	DefaultMaxDetailedSeries = 1000
	// DefaultMaxDetailedSeriesPerRule bounds the labels one detailed_metric
	// rule may hold at once, so that a client sending many values to one
	// rule cannot take the labels of every other.
	DefaultMaxDetailedSeriesPerRule = 100
)

// Options configure a [Service]. The zero value of each field but Limiter
// is its default.
type Options struct {
	// Limiter decides the limits: normally a resilient.Limiter in front of
	// a redisstore.Store, or a memory.Store. Required.
	Limiter redlimit.Limiter
	// Shadow puts every rule in shadow mode: decided and counted, never
	// denied (the --shadow flag).
	Shadow bool
	// QuotaMode puts every limit in quota mode, as envoyproxy/ratelimit's
	// QUOTA_MODE (the --quota-mode flag). A request is denied only when
	// every descriptor of it that is not unlimited is over its limit. One
	// without a limit counts as a quota with room.
	QuotaMode bool
	// DynamicMetadata has every response carry dynamic metadata, as
	// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA (the
	// --response-dynamic-metadata flag). It holds the domain, the
	// descriptors, the hits_addend, and the metadata of the rules the
	// request passed (see "Dynamic metadata" in the package documentation).
	DynamicMetadata bool
	// Counting is how rules that set no counting, in themselves or their
	// file, count the hits of a request that does not fit (default
	// config.CountingAuto; the --counting flag): see config.Counting.
	Counting config.Counting
	// Headers selects the rate-limit fields the service asks Envoy to add
	// to the response (response_headers_to_add), from the enforced limits.
	// The default is [ratelimitfield.All]. The service's flag defaults to
	// None, as envoyproxy/ratelimit adds none. With any style but None, a
	// denial that can be retried also gets Retry-After.
	Headers ratelimitfield.Style
	// HeaderNames renames response fields: a key is a field's name (such
	// as ratelimitfield.HeaderRateLimitLimit), its value the name sent
	// instead (envoyproxy/ratelimit's LIMIT_LIMIT_HEADER and the like).
	HeaderNames map[string]string
	// MaxDescriptors caps the descriptors of one request
	// (default and maximum [DefaultMaxDescriptors]).
	MaxDescriptors int
	// MaxEntries caps the entries of one descriptor (default [DefaultMaxEntries]).
	MaxEntries int
	// MaxBytes caps the bytes of the domain, keys and values of one request
	// together (default [DefaultMaxBytes]).
	MaxBytes int
	// MaxDetailedSeries bounds the rule labels detailed_metric rules hold
	// at once (default [DefaultMaxDetailedSeries]; negative: detailed_metric
	// is ignored). Each is at most [MaxDetailedLabelBytes] long.
	MaxDetailedSeries int
	// MaxDetailedSeriesPerRule bounds the labels one detailed_metric rule
	// holds at once (default [DefaultMaxDetailedSeriesPerRule]); they go to
	// its most frequent values.
	MaxDetailedSeriesPerRule int
	// DefaultAlgorithm counts a descriptor's limit override when no rule
	// of the configuration matches the descriptor (default
	// [redlimit.SlidingWindow]); when one matches, the override is counted
	// by the rule's algorithm. It may not be sliding_log, whose count would
	// then be the client's to choose (see [OverridePolicy]).
	DefaultAlgorithm redlimit.Algorithm
	// Overrides says which descriptor limit overrides the service takes
	// (default [OverridesAllow], as envoyproxy/ratelimit).
	Overrides OverridePolicy
	// MaxOverridePeriod caps a limit override's period, its unit times its
	// unit_multiplier: the longest a key's state made by an override is
	// kept (default [DefaultMaxOverridePeriod], a year).
	MaxOverridePeriod time.Duration
	// Clock tells a deny-all calendar rule when its period ends: no store
	// is asked (default time.Now).
	Clock func() time.Time
	// Observer receives every decision, for metrics (default: none). One
	// that implements [HitCounter] also gets envoyproxy/ratelimit's counts.
	Observer Observer
	// NearLimitRatio is where near_limit starts, as a fraction of a
	// limit ([HitCounter]; default [DefaultNearLimitRatio]). It is in (0, 1].
	NearLimitRatio float64
	// Trace, when not nil, is called at the end of every Decide, on its
	// goroutine. It gets the request's context, the request and what
	// Decide returned. It annotates the request's trace span (see
	// internal/tracing). It must be fast and keep nothing of req or resp.
	Trace func(ctx context.Context, req *pb.RateLimitRequest, resp *pb.RateLimitResponse, err error)
	// Logger receives errors the caller does not see (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults returns o with its defaults filled in, or an error naming
// the first bad field.
func (o Options) withDefaults() (Options, error) {
	if o.Limiter == nil {
		return o, fmt.Errorf("rls: Options.Limiter is nil")
	}
	if !o.Headers.Valid() {
		return o, fmt.Errorf("rls: unknown Options.Headers %d", o.Headers)
	}
	for from, to := range o.HeaderNames {
		if !httpguts.ValidHeaderFieldName(to) {
			return o, fmt.Errorf("rls: Options.HeaderNames: %q for %s is not a header field name", to, from)
		}
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
	if o.DefaultAlgorithm == redlimit.SlidingLog {
		return o, fmt.Errorf("rls: Options.DefaultAlgorithm may not be sliding_log: a limit override would size the log")
	}
	if o.Counting > config.CountingDebit {
		return o, fmt.Errorf("rls: unknown Options.Counting %d", o.Counting)
	}
	if o.Counting == config.CountingDefault {
		o.Counting = config.CountingAuto
	}
	if o.Overrides > OverridesRefuse {
		return o, fmt.Errorf("rls: unknown Options.Overrides %d", o.Overrides)
	}
	if o.NearLimitRatio < 0 || o.NearLimitRatio > 1 || math.IsNaN(o.NearLimitRatio) {
		return o, fmt.Errorf("rls: Options.NearLimitRatio %v is not in (0, 1]", o.NearLimitRatio)
	}
	if o.NearLimitRatio == 0 {
		o.NearLimitRatio = DefaultNearLimitRatio
	}
	if o.MaxOverridePeriod < 0 {
		return o, fmt.Errorf("rls: negative Options.MaxOverridePeriod")
	}
	if o.MaxOverridePeriod == 0 {
		o.MaxOverridePeriod = DefaultMaxOverridePeriod
	}
	if o.MaxDescriptors == 0 {
		o.MaxDescriptors = DefaultMaxDescriptors
	}
	if o.Clock == nil {
		o.Clock = time.Now
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
	if o.MaxDetailedSeriesPerRule <= 0 {
		o.MaxDetailedSeriesPerRule = DefaultMaxDetailedSeriesPerRule
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
