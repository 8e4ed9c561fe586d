package rls

import (
	"strings"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/redlimit/redlimit"
)

// Outcome is the service's answer for one limited descriptor of a request.
type Outcome uint8

const (
	// Allowed: the descriptor's limit allowed the request. (The request as
	// a whole may still have been denied by another descriptor.)
	Allowed Outcome = iota
	// Denied: the descriptor's limit denied the request; for a quota,
	// the request may still have passed on another quota with room.
	Denied
	// ShadowDenied: a shadow-mode limit would have denied the request; it
	// was answered OK.
	ShadowDenied
	// Unlimited: the descriptor matched an unlimited rule.
	Unlimited
	// Undecided: the store could not decide the descriptor's limit while
	// another limit denied the request ([redlimit.Undecided]); its status
	// code is UNKNOWN.
	Undecided
)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "unlimited", "undecided"}

// String returns the outcome's metric label: "allowed", "denied",
// "shadow_denied", "unlimited" or "undecided".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Answers of a request, as [Observer.Request] reports them.
const (
	AnswerOK          = "ok"          // OK, or no limit applied
	AnswerOverLimit   = "over_limit"  // OVER_LIMIT
	AnswerInvalid     = "invalid"     // refused: ErrInvalidRequest
	AnswerUnavailable = "unavailable" // no configuration yet, or the limiter closed
	AnswerError       = "error"       // the limiter failed, or the caller went away
)

// Observer receives what the service decides, for metrics. Its methods are
// called on the request path: they must be safe for concurrent use and
// fast. The server package's Prometheus collector is one.
type Observer interface {
	// Request reports one request: its answer (AnswerOK...) and how long
	// the service took.
	Request(answer string, took time.Duration)
	// Descriptor reports one limited descriptor. It gives its domain and
	// its rule's label: the rule's path, or with detailed_metric, the path
	// with the request's values. It gives its outcome and which path
	// decided it. It gives the descriptor's entries, the limited key
	// ([FormatEntries] makes it readable). The entries belong to the
	// request. Read them during the call, and keep nothing of them. Format
	// them only when needed (for denials, say). So an allowed descriptor
	// allocates nothing.
	Descriptor(domain, rule string, outcome Outcome, source redlimit.Source, entries []*rlpb.RateLimitDescriptor_Entry)
	// Backend reports one call to the limiter: how long it took, the first
	// non-store source among its results (redlimit.FromStore when the store
	// answered every limit), and its error.
	Backend(took time.Duration, source redlimit.Source, err error)
}

type nopObserver struct{}

func (nopObserver) Request(string, time.Duration) {}

func (nopObserver) Descriptor(string, string, Outcome, redlimit.Source, []*rlpb.RateLimitDescriptor_Entry) {
}

func (nopObserver) Backend(time.Duration, redlimit.Source, error) {}

// FormatEntries returns a descriptor's entries as key=value pairs joined by
// commas, a readable form of the limited key: "remote_address=10.0.0.1",
// "tenant=acme,user=u1". An entry without a value is its key alone.
func FormatEntries(entries []*rlpb.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.GetKey())
		if v := e.GetValue(); v != "" {
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}
