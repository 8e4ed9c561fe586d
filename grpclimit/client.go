package grpclimit

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit/backoff"
)

// UnaryClientInterceptor returns a client interceptor that honours the
// RetryInfo a server sends with codes.ResourceExhausted. It waits the
// delay, plus jitter, and calls again, as p allows. [backoff.Policy] sets
// the attempts and the longest acceptable wait; the call's deadline also
// bounds it. A failure without a RetryInfo, or with another code, is
// returned as it is. So is the last one when p gives up.
//
// A call refused by a rate limiter never reached its handler. So calling
// again is safe whatever the method does. A handler that had effects
// should not send ResourceExhausted with a RetryInfo.
func UnaryClientInterceptor(p backoff.Policy) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for attempts := 1; ; attempts++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil {
				return nil
			}
			d, ok := RetryDelay(err)
			if !ok || !p.Wait(ctx, attempts, d) {
				return err
			}
		}
	}
}

// RetryDelay returns the delay of the RetryInfo detail of err, if err is a
// status with codes.ResourceExhausted that carries a valid one.
func RetryDelay(err error) (d time.Duration, ok bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, det := range st.Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(0, ri.GetRetryDelay().AsDuration()), true
		}
	}
	return 0, false
}
