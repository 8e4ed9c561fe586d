package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// retryDelayResolution is what RetryInfo delays are rounded up to.
const retryDelayResolution = time.Millisecond

// Options configures an [Interceptor]. The zero value is the default: every
// rate-limit field in the response header metadata, fail open, and
// slog.Default for logs.
type Options struct {
	// Metadata selects the rate-limit fields sent as response header
	// metadata, as httplimit's Options.Headers does for HTTP. The zero
	// value, ratelimitfield.All, sends the draft's and the X-RateLimit-*
	// fields.
	Metadata ratelimitfield.Style
	// FailClosed makes a limiter error refuse the call with
	// codes.Unavailable. Otherwise the call is served without limits and
	// the error logged: failing open. A call whose own context ends before
	// the limiter decides its enforced rules is refused either way. It
	// gets its context's status (DeadlineExceeded or Canceled). A call to
	// which only shadow rules apply is served, as they never refuse. A
	// resilient.Limiter in front of a store decides within the call's
	// deadline when the store is slow or down.
	FailClosed bool
	// Logger receives limiter errors (Error), shadow rules that would deny
	// (Info), key errors (Warn) and denials (Debug). nil means
	// slog.Default() at the time of logging.
	Logger *slog.Logger
}

// Interceptor rate limits the calls of a gRPC server. Make one with [New]
// and install its [Interceptor.Unary] and [Interceptor.Stream]. It is safe
// for concurrent use.
type Interceptor struct {
	lim   redlimit.Limiter
	opts  Options
	rules *ruleset.Set[call]
	sem   redlimit.Semaphore // lim, when it keeps leases
}

// New returns an interceptor that decides every call against rules with lim.
// Its error wraps [ErrNoRules] for no rules, and [ErrInvalidRule] for a bad
// name, key function or cost. A bad limit gets the redlimit sentinel errors.
func New(lim redlimit.Limiter, opts Options, rules ...Rule) (*Interceptor, error) {
	if lim == nil {
		return nil, errors.New("grpclimit: nil limiter")
	}
	if !opts.Metadata.Valid() {
		return nil, errors.New("grpclimit: unknown Metadata value")
	}
	rs, err := newRuleSet(rules)
	if err != nil {
		return nil, err
	}
	sem, ok := lim.(redlimit.Semaphore)
	if len(rs.Held) > 0 && !ok {
		return nil, fmt.Errorf("%w: in-flight rules need a limiter that keeps leases (a redlimit.Semaphore)", ErrInvalidRule)
	}
	return &Interceptor{lim: lim, opts: opts, rules: rs, sem: sem}, nil
}

// Unary returns a unary server interceptor. A denied call fails with
// codes.ResourceExhausted and a RetryInfo detail before the handler runs.
func (in *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := in.check(ctx, info.FullMethod, req)
		if len(md) > 0 {
			grpc.SetHeader(ctx, md) // fails only if headers were sent, which they cannot have been
		}
		if err != nil {
			return nil, err
		}
		release, err := in.hold(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		defer release()
		return handler(ctx, req)
	}
}

// Stream returns a stream server interceptor that decides once, when the
// stream is opened. A denied stream fails with codes.ResourceExhausted and
// a RetryInfo detail before the handler runs. The messages of an admitted
// stream are not counted.
func (in *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := in.check(ss.Context(), info.FullMethod, nil)
		if len(md) > 0 {
			ss.SetHeader(md)
		}
		if err != nil {
			return err
		}
		release, err := in.hold(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		defer release()
		return handler(srv, ss)
	}
}

func (in *Interceptor) logger() *slog.Logger {
	if in.opts.Logger != nil {
		return in.opts.Logger
	}
	return slog.Default()
}

// check decides a call and returns the metadata to send, and the status
// error that refuses it, if it is refused.
func (in *Interceptor) check(ctx context.Context, method string, req any) (metadata.MD, error) {
	applied, bad, err := in.rules.Apply(call{ctx: ctx, method: method, req: req}, "", func(r *ruleset.Rule[call], err error) {
		in.logger().LogAttrs(ctx, slog.LevelWarn, "grpclimit: call not decided by a shadow rule: bad key, limit or cost", slog.String("method", method), slog.String("rule", r.Name), slog.Any("err", err))
	})
	if err != nil {
		in.logger().LogAttrs(ctx, slog.LevelWarn, "grpclimit: call not decided: bad key, limit or cost", slog.String("method", method), slog.String("rule", bad.Name), slog.Any("err", err))
		return nil, status.Errorf(codes.InvalidArgument, "grpclimit: the call gives rate limit %q no key, limit or cost it can use", bad.Name)
	}
	if len(applied) == 0 {
		return nil, nil
	}
	v, err := in.rules.Decide(ctx, in.lim, in.logger(), applied, []slog.Attr{slog.String("method", method)})
	if err != nil {
		if cerr := ruleset.Ended(ctx); cerr != nil {
			// The call ended (its deadline passed, or its client went
			// away) before the limiter decided: not served, unlimited
			// or otherwise.
			in.logger().LogAttrs(ctx, slog.LevelWarn, "grpclimit: the call ended before the limiter decided", slog.String("method", method), slog.Any("err", err))
			return nil, status.FromContextError(cerr).Err()
		}
		if in.opts.FailClosed {
			in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; refusing the call", slog.String("method", method), slog.Any("err", err))
			return nil, status.Error(codes.Unavailable, "grpclimit: the rate limiter is unavailable")
		}
		in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; serving the call unlimited", slog.String("method", method), slog.Any("err", err))
		return nil, nil
	}
	md := metadata.MD{}
	in.opts.Metadata.Write(v.Quotas(), func(name, value string) { md.Set(name, value) }) // Set lowers the keys' case
	if v.Allowed {
		return md, nil
	}
	if ra, ok := ratelimitfield.RetryAfterValue(v.RetryAfter); ok {
		md.Set(ratelimitfield.HeaderRetryAfter, ra) // lower-cased by Set
	}
	st := denialStatus(&v)
	in.logger().LogAttrs(ctx, slog.LevelDebug, "grpclimit: denied", slog.String("method", method), slog.String("status", st.Message()))
	return md, st.Err()
}

// hold holds the slots of the in-flight rules for a call (see
// Rule.InFlight), and returns their release, or the status error that
// refuses the call.
func (in *Interceptor) hold(ctx context.Context, method string, req any) (release func(), err error) {
	if len(in.rules.Held) == 0 {
		return func() {}, nil
	}
	release, rule, l, err := in.rules.Hold(ctx, in.sem, call{ctx: ctx, method: method, req: req}, "")
	switch {
	case err != nil && ruleset.KeyFailed(err):
		in.logger().LogAttrs(ctx, slog.LevelWarn, "grpclimit: call not decided: bad key", slog.String("method", method), slog.String("rule", rule.Name), slog.Any("err", err))
		return nil, status.Errorf(codes.InvalidArgument, "grpclimit: the call gives concurrency limit %q no key it can use", rule.Name)
	case err != nil && in.opts.FailClosed:
		in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; refusing the call", slog.String("method", method), slog.Any("err", err))
		return nil, status.Error(codes.Unavailable, "grpclimit: the rate limiter is unavailable")
	case err != nil:
		in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; serving the call unlimited", slog.String("method", method), slog.Any("err", err))
		return func() {}, nil
	case rule != nil:
		in.logger().LogAttrs(ctx, slog.LevelDebug, "grpclimit: denied: no slot free", slog.String("method", method), slog.String("rule", rule.Name))
		return nil, inFlightStatus(rule.Name, rule.InFlight, l.RetryAfter).Err()
	}
	return release, nil
}

// inFlightStatus returns the status of a call denied by the in-flight rule
// name of c: ResourceExhausted, with a QuotaFailure and a RetryInfo detail.
func inFlightStatus(name string, c redlimit.Concurrency, retry time.Duration) *status.Status {
	delay := retry.Truncate(retryDelayResolution)
	if delay < retry {
		delay += retryDelayResolution
	}
	st := status.Newf(codes.ResourceExhausted, "concurrency limit %q (%d in flight) exceeded: retry after %s", name, c.Slots, delay)
	qf := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject: name, Description: fmt.Sprintf("concurrency limit %q (%d in flight) exceeded", name, c.Slots),
	}}}
	if withDetails, err := st.WithDetails(qf, &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = withDetails
	}
	return st
}

// denialStatus returns the status of a denied call: ResourceExhausted. A
// QuotaFailure detail names every enforced rule that denied. A RetryInfo
// detail says when to retry; none when the call can never pass.
func denialStatus(v *ruleset.Verdict[call]) *status.Status {
	qf := &errdetails.QuotaFailure{}
	denied, worst := v.Denied()
	for _, i := range denied {
		r := v.Applied[i].Rule
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     r.Name,
			Description: fmt.Sprintf("rate limit %q (%s) exceeded", r.Name, v.Applied[i].Limit),
		})
	}
	name, limit := "", redlimit.Limit{}
	if worst >= 0 {
		name, limit = v.Applied[worst].Rule.Name, v.Applied[worst].Limit
	}
	var st *status.Status
	details := []protoadapt.MessageV1{qf}
	if v.RetryAfter == redlimit.Never {
		st = status.Newf(codes.ResourceExhausted, "rate limit %q (%s) exceeded: the call costs more than the limit ever allows", name, limit)
	} else {
		delay := v.RetryAfter.Truncate(retryDelayResolution)
		if delay < v.RetryAfter {
			delay += retryDelayResolution
		}
		st = status.Newf(codes.ResourceExhausted, "rate limit %q (%s) exceeded: retry after %s", name, limit, delay)
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st
}
