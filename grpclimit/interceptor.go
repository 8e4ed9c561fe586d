package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/ruleset"
)

// Metadata keys of the rate-limit fields: those of httplimit, lower-case.
const (
	MDRateLimitPolicy     = "ratelimit-policy"
	MDRateLimit           = "ratelimit"
	MDXRateLimitLimit     = "x-ratelimit-limit"
	MDXRateLimitRemaining = "x-ratelimit-remaining"
	MDXRateLimitReset     = "x-ratelimit-reset"
	MDRetryAfter          = "retry-after"
)

// retryDelayResolution is what RetryInfo delays are rounded up to.
const retryDelayResolution = time.Millisecond

// Options configures an [Interceptor]. The zero value is the default: every
// rate-limit field in the response header metadata, fail open, and
// slog.Default for logs.
type Options struct {
	// Metadata selects the rate-limit fields sent as response header
	// metadata, as httplimit's Options.Headers does for HTTP. The zero value
	// sends them all.
	Metadata httplimit.Headers
	// FailClosed makes a limiter error refuse the call with
	// codes.Unavailable. Otherwise the call is served without limits and
	// the error logged: failing open.
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
	lim      redlimit.Limiter
	opts     Options
	rules    *ruleset.Set[call]
	policies []string // the ratelimit-policy item of each rule
}

// New returns an interceptor that decides every call against rules with lim.
// It reports an error wrapping [ErrNoRules] for no rules, [ErrInvalidRule]
// for a bad name, key function or cost, and the redlimit sentinel errors for
// a bad limit.
func New(lim redlimit.Limiter, opts Options, rules ...Rule) (*Interceptor, error) {
	if lim == nil {
		return nil, errors.New("grpclimit: nil limiter")
	}
	if opts.Metadata > httplimit.NoHeaders {
		return nil, errors.New("grpclimit: unknown Metadata value")
	}
	rs, err := newRuleSet(rules)
	if err != nil {
		return nil, err
	}
	in := &Interceptor{lim: lim, opts: opts, rules: rs, policies: make([]string, len(rs.Rules))}
	for i, r := range rs.Rules {
		in.policies[i] = httplimit.PolicyOf(r.Name, r.Limit).String()
	}
	return in, nil
}

// Unary returns a unary server interceptor. A denied call fails with
// codes.ResourceExhausted and a RetryInfo detail before the handler runs.
func (in *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := in.check(ctx, info.FullMethod)
		if len(md) > 0 {
			grpc.SetHeader(ctx, md) // fails only if headers were sent, which they cannot have been
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns a stream server interceptor that decides once, when the
// stream is opened: a denied stream fails with codes.ResourceExhausted and a
// RetryInfo detail before the handler runs; the messages of an admitted
// stream are not counted.
func (in *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := in.check(ss.Context(), info.FullMethod)
		if len(md) > 0 {
			ss.SetHeader(md)
		}
		if err != nil {
			return err
		}
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
func (in *Interceptor) check(ctx context.Context, method string) (metadata.MD, error) {
	applied, bad, err := in.rules.Apply(call{ctx, method})
	if err != nil {
		in.logger().LogAttrs(ctx, slog.LevelWarn, "grpclimit: call not keyed", slog.String("method", method), slog.String("rule", bad.Name), slog.Any("err", err))
		return nil, status.Errorf(codes.InvalidArgument, "grpclimit: the call cannot be keyed for rate limit %q", bad.Name)
	}
	if len(applied) == 0 {
		return nil, nil
	}
	out, err := in.rules.Decide(ctx, in.lim, in.logger(), applied, []slog.Attr{slog.String("method", method)})
	if err != nil {
		if in.opts.FailClosed {
			in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; refusing the call", slog.String("method", method), slog.Any("err", err))
			return nil, status.Error(codes.Unavailable, "grpclimit: the rate limiter is unavailable")
		}
		in.logger().LogAttrs(ctx, slog.LevelError, "grpclimit: limiter failed; serving the call unlimited", slog.String("method", method), slog.Any("err", err))
		return nil, nil
	}
	md := in.metadata(&out)
	if out.Allowed {
		return md, nil
	}
	if out.RetryAfter != redlimit.Never {
		md = metadata.Join(md, metadata.Pairs(MDRetryAfter, strconv.FormatInt(ruleset.RetryAfterSeconds(out.RetryAfter), 10)))
	}
	st := denialStatus(&out)
	in.logger().LogAttrs(ctx, slog.LevelDebug, "grpclimit: denied", slog.String("method", method), slog.String("status", st.Message()))
	return md, st.Err()
}

// metadata returns the selected rate-limit fields, as httplimit sets them.
func (in *Interceptor) metadata(out *ruleset.Outcome[call]) metadata.MD {
	sel := in.opts.Metadata
	if sel == httplimit.NoHeaders {
		return nil
	}
	draft := sel == httplimit.AllHeaders || sel == httplimit.DraftHeaders
	x := sel == httplimit.AllHeaders || sel == httplimit.XHeaders
	md := metadata.MD{}
	if draft {
		policy := make([]string, len(out.Applied))
		for i, a := range out.Applied {
			policy[i] = in.policies[a.Index]
		}
		md.Set(MDRateLimitPolicy, strings.Join(policy, ", "))
	}
	t := out.Tightest()
	if t < 0 {
		return md
	}
	res := out.Results[t]
	sl := httplimit.ServiceLimitOf(out.Applied[t].Rule.Name, res)
	if draft {
		md.Set(MDRateLimit, sl.String())
	}
	if x {
		md.Set(MDXRateLimitLimit, strconv.FormatInt(res.Limit, 10))
		md.Set(MDXRateLimitRemaining, strconv.FormatInt(sl.Remaining, 10))
		if sl.Reset >= 0 {
			md.Set(MDXRateLimitReset, strconv.FormatInt(int64(sl.Reset/time.Second), 10))
		}
	}
	return md
}

// denialStatus returns the status of a denied call: ResourceExhausted, with a
// QuotaFailure detail naming every enforced rule that denied and a RetryInfo
// detail saying when to retry (none when the call can never pass).
func denialStatus(out *ruleset.Outcome[call]) *status.Status {
	qf := &errdetails.QuotaFailure{}
	denied, worst := out.Denied()
	for _, i := range denied {
		r := out.Applied[i].Rule
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     r.Name,
			Description: fmt.Sprintf("rate limit %q (%s) exceeded", r.Name, r.Limit),
		})
	}
	name, limit := "", redlimit.Limit{}
	if worst >= 0 {
		name, limit = out.Applied[worst].Rule.Name, out.Applied[worst].Rule.Limit
	}
	var st *status.Status
	details := []protoadapt.MessageV1{qf}
	if out.RetryAfter == redlimit.Never {
		st = status.Newf(codes.ResourceExhausted, "rate limit %q (%s) exceeded: the call costs more than the limit ever allows", name, limit)
	} else {
		delay := out.RetryAfter.Truncate(retryDelayResolution)
		if delay < out.RetryAfter {
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
