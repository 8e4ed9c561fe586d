package tracing

import (
	"context"
	"errors"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// Attribute keys of redlimit's own.
const (
	keyDomain      = attribute.Key("redlimit.domain")
	keyDescriptors = attribute.Key("redlimit.descriptors")
	keyOverallCode = attribute.Key("redlimit.overall_code")
	keySource      = attribute.Key("redlimit.source")
	keyError       = attribute.Key("redlimit.error")
	keyLimits      = attribute.Key("redlimit.limits")
	keyAllowed     = attribute.Key("redlimit.allowed")
)

// decision is what a sampled request's span gathers while it is decided.
// The request's goroutine alone reads and writes it.
type decision struct {
	span   trace.Span
	asked  bool            // a limiter call was made
	source redlimit.Source // the first that is not the store, over the calls
}

type decisionKey struct{}

// withDecision returns ctx carrying a decision of span, which must be
// recording.
func withDecision(ctx context.Context, span trace.Span) (context.Context, *decision) {
	d := &decision{span: span}
	return context.WithValue(ctx, decisionKey{}, d), d
}

// decisionFrom returns the decision ctx carries, or nil outside a sampled
// request.
func decisionFrom(ctx context.Context) *decision {
	d, _ := ctx.Value(decisionKey{}).(*decision)
	return d
}

// note records the source of a limiter call.
func (d *decision) note(src redlimit.Source) {
	if !d.asked || d.source == redlimit.FromStore {
		d.source = src
	}
	d.asked = true
}

// Decided annotates the span of the request in ctx with what Decide came
// to; it is the service's rls.Options.Trace. Outside a sampled request it
// does nothing.
func (t *Tracing) Decided(ctx context.Context, req *pb.RateLimitRequest, resp *pb.RateLimitResponse, err error) {
	d := decisionFrom(ctx)
	if d == nil {
		return
	}
	source := "none"
	if d.asked {
		source = d.source.String()
	}
	d.span.SetAttributes(
		keyDomain.String(req.GetDomain()),
		keyDescriptors.Int(len(req.GetDescriptors())),
		keySource.String(source))
	if err != nil {
		d.span.SetAttributes(keyError.String(errorClass(err)))
		return
	}
	d.span.SetAttributes(keyOverallCode.String(resp.GetOverallCode().String()))
}

// errorClass names an error of Decide without its message, which may say
// more than a trace should keep.
func errorClass(err error) string {
	switch {
	case errors.Is(err, rls.ErrInvalidRequest):
		return rls.AnswerInvalid
	case errors.Is(err, rls.ErrNoConfig), errors.Is(err, redlimit.ErrClosed):
		return rls.AnswerUnavailable
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return rls.AnswerError
}

// fail marks span as failed with the class of err.
func fail(span trace.Span, err error) {
	span.SetStatus(codes.Error, errorClass(err))
}
