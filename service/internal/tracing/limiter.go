package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlimit/redlimit"
)

// Store says what a traced limiter stands in front of.
type Store uint8

const (
	// Memory: the limiter decides in process.
	Memory Store = iota
	// Redis: the limiter asks Redis (through the resilient limiter, whose
	// deny cache and failure policies may answer in its place).
	Redis
)

// Limiter returns l with a child span of the request's for each AllowAll
// and Peek made while a sampled request is decided; other calls, and
// those outside a sampled request, go to l untouched.
func (t *Tracing) Limiter(l redlimit.Limiter, store Store) redlimit.Limiter {
	tl := &limiter{Limiter: l, t: t, kind: trace.SpanKindInternal}
	if store == Redis {
		tl.kind = trace.SpanKindClient
		tl.attrs = []attribute.KeyValue{attribute.String("db.system.name", "redis")}
	}
	return tl
}

type limiter struct {
	redlimit.Limiter
	t     *Tracing
	kind  trace.SpanKind
	attrs []attribute.KeyValue
}

// AllowAll implements redlimit.Limiter.
func (l *limiter) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	d := decisionFrom(ctx)
	if d == nil {
		return l.Limiter.AllowAll(ctx, reqs)
	}
	ctx, span := l.start(ctx, "redlimit.AllowAll")
	defer span.End()
	dec, err := l.Limiter.AllowAll(ctx, reqs)
	src := redlimit.FromStore
	for _, r := range dec.Results {
		if r.Source != redlimit.FromStore {
			src = r.Source
			break
		}
	}
	l.end(d, span, len(reqs), dec.Allowed, src, err)
	return dec, err
}

// Peek implements redlimit.Limiter.
func (l *limiter) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	d := decisionFrom(ctx)
	if d == nil {
		return l.Limiter.Peek(ctx, key, limit, n)
	}
	ctx, span := l.start(ctx, "redlimit.Peek")
	defer span.End()
	res, err := l.Limiter.Peek(ctx, key, limit, n)
	l.end(d, span, 1, res.Allowed, res.Source, err)
	return res, err
}

func (l *limiter) start(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, span := l.t.tracer.Start(ctx, name, trace.WithSpanKind(l.kind))
	span.SetAttributes(l.attrs...)
	return ctx, span
}

// end annotates the span of a call, and notes its source in the decision.
func (l *limiter) end(d *decision, span trace.Span, limits int, allowed bool, src redlimit.Source, err error) {
	span.SetAttributes(keyLimits.Int(limits))
	if err != nil {
		fail(span, err)
		return
	}
	d.note(src)
	span.SetAttributes(keyAllowed.Bool(allowed), keySource.String(src.String()))
}
