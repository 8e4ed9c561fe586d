package rls

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// Service is the Envoy Rate Limit Service v3 on a [redlimit.Limiter] and a
// rule configuration that can be swapped while it serves. It implements
// pb.RateLimitServiceServer; [Service.JSONHandler] serves the same messages
// as JSON over HTTP.
//
// A Service is safe for concurrent use. It answers nothing but Unavailable
// until its first configuration is set.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	opts Options
	cfg  atomic.Pointer[config.Config]
	// setMu orders SetConfig's calls, each storing the configuration and
	// pruning the detailed labels for it.
	setMu sync.Mutex

	detailed detailedLabels
	hits     HitCounter // the observer's, or nil
}

var _ pb.RateLimitServiceServer = (*Service)(nil)

// New returns a Service deciding with opts.Limiter. It has no configuration
// until [Service.SetConfig].
func New(opts Options) (*Service, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Service{opts: o}
	s.hits, _ = o.Observer.(HitCounter)
	return s, nil
}

// SetConfig makes c the configuration of every request that starts from
// now on. Requests in flight finish with the one they started with. A nil
// c is ignored: the service never goes back to having no configuration.
// Some rules c no longer names by values: a rule removed, renamed or no
// longer detailed. Their detailed_metric labels are given back, and their
// series dropped (see "Metrics" in the package documentation).
func (s *Service) SetConfig(c *config.Config) {
	if c != nil {
		s.setMu.Lock()
		defer s.setMu.Unlock()
		s.cfg.Store(c)
		s.detailed.prune(c, s.opts.Observer)
	}
}

// Config returns the configuration in use, nil before the first SetConfig.
func (s *Service) Config() *config.Config { return s.cfg.Load() }

// Ready reports whether the service has a configuration and so answers
// requests.
func (s *Service) Ready() bool { return s.cfg.Load() != nil }

// ShouldRateLimit implements pb.RateLimitServiceServer. Errors are gRPC
// statuses: InvalidArgument for a request that breaks the rules of
// [Service.Decide], Unavailable before the first configuration, Canceled or
// DeadlineExceeded when the caller gave up, Internal otherwise.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	resp, err := s.Decide(ctx, req)
	if err != nil {
		return nil, status.Error(grpcCode(err), err.Error())
	}
	return resp, nil
}

// grpcCode returns the gRPC code for an error of Decide.
func grpcCode(err error) codes.Code {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return codes.InvalidArgument
	case errors.Is(err, ErrNoConfig), errors.Is(err, redlimit.ErrClosed):
		return codes.Unavailable
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// answerOf returns how Observer.Request names an error of Decide.
func answerOf(err error) string {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return AnswerInvalid
	case errors.Is(err, ErrNoConfig), errors.Is(err, redlimit.ErrClosed):
		return AnswerUnavailable
	}
	return AnswerError
}

// Decide answers one request, as ShouldRateLimit does, with plain errors:
// wrapping [ErrInvalidRequest] for a bad request, [ErrNoConfig] before the
// first configuration, or the limiter's error.
func (s *Service) Decide(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.answer(ctx, req)
	switch {
	case err != nil:
		s.opts.Observer.Request(answerOf(err), time.Since(start))
		switch {
		case answerOf(err) == AnswerError && ctx.Err() == nil:
			s.opts.Logger.Error("rls: limiter failed", "domain", req.GetDomain(), "err", err)
		}
	case resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT:
		s.opts.Observer.Request(AnswerOverLimit, time.Since(start))
	default:
		s.opts.Observer.Request(AnswerOK, time.Since(start))
	}
	if s.opts.Trace != nil {
		s.opts.Trace(ctx, req, resp, err)
	}
	return resp, err
}
