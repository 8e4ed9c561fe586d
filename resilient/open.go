package resilient

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlimit/redlimit/redisstore"
)

// FixedNodes is a [NodeCounter] with a set count, for a fixed deployment.
// FixedNodes(1) says that this process alone shares the limits.
type FixedNodes int

// Nodes returns n, at least 1.
func (n FixedNodes) Nodes() int { return max(int(n), 1) }

// Open returns a Limiter ready for production in front of the Redis named
// by rawURL. It opens the store with [redisstore.Open] and registers this
// node in the store's live-node registry ([redisstore.Store.Register]).
// Unless opts.Nodes is set, the registry counts the nodes, so that during
// an outage each of N nodes takes 1/N of a limit. Every other part of the
// Limiter (deadline, breaker, deny cache) is as opts say.
//
// Closing the Limiter closes the registry and the store. Errors wrap
// [redisstore.ErrConnect] when Redis cannot be used.
func Open(ctx context.Context, rawURL string, opts Options, storeOpts ...redisstore.Option) (*Limiter, error) {
	store, err := redisstore.Open(ctx, rawURL, storeOpts...)
	if err != nil {
		return nil, err
	}
	reg, err := store.Register(ctx, redisstore.RegistryOptions{Logger: opts.Logger})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("resilient: live-node registry: %w", err), store.Close())
	}
	if opts.Nodes == nil {
		opts.Nodes = reg
	}
	l, err := New(store, opts)
	if err != nil {
		return nil, errors.Join(err, reg.Close(), store.Close())
	}
	l.owned = []func() error{reg.Close, store.Close}
	return l, nil
}
