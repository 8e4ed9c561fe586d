package loadgen

import (
	"context"

	"github.com/redlimit/redlimit"
)

// A Target decides requests: the thing under load. Decide reports whether
// a request of the given cost for key is allowed. A denial is allowed ==
// false with a nil error. A failure is an error: the store or service
// could not decide. Decide is called from many goroutines at once. It must
// honour ctx: [Run] cancels it to end calls still running after the run.
type Target interface {
	Decide(ctx context.Context, key string, cost int64) (allowed bool, err error)
}

// A WorkerTarget is a Target that gives each worker of a [Run] a Target of
// its own, such as a connection of its own: worker i, 0 <= i <
// Options.Concurrency, asks ForWorker(i). ForWorker is called before the
// load starts.
type WorkerTarget interface {
	Target
	ForWorker(i int) Target
}

// TargetFunc adapts a function to [Target].
type TargetFunc func(ctx context.Context, key string, cost int64) (bool, error)

// Decide calls f(ctx, key, cost).
func (f TargetFunc) Decide(ctx context.Context, key string, cost int64) (bool, error) {
	return f(ctx, key, cost)
}

// LimiterTarget decides in process with a [redlimit.Limiter]: the memory
// store, a redisstore.Store on Redis, or a resilient.Limiter around one.
// Every decision is one AllowN call with Limit.
type LimiterTarget struct {
	// Limiter decides; it must be safe for concurrent use, as every store is.
	Limiter redlimit.Limiter
	// Limit is the limit of every key.
	Limit redlimit.Limit
	// Name describes the limiter in the result, such as "memory" or
	// "redis redis://127.0.0.1:6379"; "" shows as "limiter".
	Name string
}

var (
	_ Target = (*LimiterTarget)(nil)
	_ Target = TargetFunc(nil)
)

// Decide calls AllowN for key with t.Limit and cost.
func (t *LimiterTarget) Decide(ctx context.Context, key string, cost int64) (bool, error) {
	res, err := t.Limiter.AllowN(ctx, key, t.Limit, cost)
	return res.Allowed, err
}

// String returns t.Name, or "limiter".
func (t *LimiterTarget) String() string {
	if t.Name == "" {
		return "limiter"
	}
	return t.Name
}
