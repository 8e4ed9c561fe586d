package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

// minRegistryInterval is the least [RegistryOptions] Interval and TTL.
const minRegistryInterval = time.Millisecond

// RegistryOptions configures [Store.Register]. The zero value is the default.
type RegistryOptions struct {
	// ID names this node; default a random 16-hex-digit id.
	ID string
	// Interval is the time between heartbeats; default 1s, at least
	// a millisecond.
	Interval time.Duration
	// TTL is how long a node counts as live after its last heartbeat;
	// default 3 intervals. It must be longer than Interval (and so at
	// least a millisecond), or a heartbeat a little late would let
	// the node's entry expire.
	TTL time.Duration
	// Logger receives heartbeat failures; default slog.Default().
	Logger *slog.Logger
}

// Registry keeps this node registered as live in Redis and counts the live
// nodes, so a local fallback can take this node's share of a limit. It is
// safe for concurrent use.
//
// Each node's entry lasts its own TTL, so nodes with different intervals
// count each other. A heartbeat may find this node missing from the
// registry. Redis restarted empty, or failed over to a replica that lost
// it; the registry was deleted; or Redis's clock jumped past the TTL. Or a
// heartbeat follows one that failed. Either way the other nodes may not
// have beaten again yet. So the count does not drop below the one held
// before, until Redis has answered this node's heartbeats for one TTL from
// then. An outage
// right after then cannot leave this node counting itself alone and
// taking the whole limit as its share. A failed heartbeat counts because
// Redis may run it late, after a hang: it puts this node back, and the
// next heartbeat no longer finds it missing. (This assumes the other
// nodes beat at least once per this node's TTL.)
type Registry struct {
	s     *Store
	key   string
	opts  RegistryOptions
	nodes atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Written by the heartbeats, which run one at a time.
	joined      bool      // a heartbeat has succeeded
	interrupted bool      // the last heartbeat failed
	floor       int64     // 0, or the count held when the count was last in doubt
	floorUntil  time.Time // until when the count stays at least floor
}

// Register adds this node to the live-node registry (one sorted set per key
// prefix, "<prefix>{nodes}"), and keeps it there with a heartbeat until
// Close. The first heartbeat is made before Register returns, so an
// unreachable Redis is an error here.
func (s *Store) Register(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	if opts.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.ID = hex.EncodeToString(b[:])
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("redisstore: registry Interval %s is negative", opts.Interval)
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("redisstore: registry TTL %s is negative", opts.TTL)
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.Interval < minRegistryInterval {
		return nil, fmt.Errorf("redisstore: registry Interval %s is shorter than %s", opts.Interval, minRegistryInterval)
	}
	if opts.TTL == 0 {
		opts.TTL = 3 * opts.Interval
	}
	if opts.TTL <= opts.Interval {
		return nil, fmt.Errorf("redisstore: registry TTL %s is not longer than its Interval %s", opts.TTL, opts.Interval)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{s: s, key: s.prefix + "{nodes}", opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	r.nodes.Store(1)
	if err := r.beat(ctx, "beat"); err != nil {
		return nil, err
	}
	go r.loop()
	return r, nil
}

// Nodes returns the number of live nodes as last seen, at least 1. While
// Redis cannot be reached it keeps the last count it saw. After the registry
// was found lost, or a heartbeat failed, it is at least the count held
// before until Redis has answered for one TTL.
func (r *Registry) Nodes() int { return int(r.nodes.Load()) }

// ID returns this node's id.
func (r *Registry) ID() string { return r.opts.ID }

// Close stops the heartbeat and removes this node from the registry. It
// tries for a second: a connection broken by an outage fails the first
// try. If all fail, the node's entry expires after its TTL.
func (r *Registry) Close() error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for {
			if err = r.beat(ctx, "leave"); err == nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return err
}

func (r *Registry) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.Interval)
			if err := r.beat(ctx, "beat"); err != nil {
				r.opts.Logger.Warn("redlimit: node heartbeat failed; keeping the last node count", "nodes", r.Nodes(), "err", err)
			}
			cancel()
		}
	}
}

func (r *Registry) beat(ctx context.Context, op string) error {
	reply, err := r.s.b.eval(ctx, nodesScript, []string{r.key}, []string{r.opts.ID, strconv.FormatInt(r.opts.TTL.Microseconds(), 10), op})
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("%w: %d values", redlimit.ErrBadReply, len(reply))
	}
	if err != nil {
		r.interrupted = true
		return fmt.Errorf("redisstore: node registry: %w", err)
	}
	if op == "beat" {
		r.count(reply[0], reply[1] == 1, time.Now())
	}
	return nil
}

// count takes n, the live nodes a heartbeat read at now, added telling
// whether it found this node missing.
func (r *Registry) count(n int64, added bool, now time.Time) {
	if r.joined && (added || r.interrupted) {
		// The others may not have beaten since: keep the count a TTL.
		r.floor, r.floorUntil = r.nodes.Load(), now.Add(r.opts.TTL)
	}
	r.joined, r.interrupted = true, false
	if r.floor > 0 {
		if now.Before(r.floorUntil) {
			n = max(n, r.floor)
		} else {
			r.floor = 0
		}
	}
	r.nodes.Store(max(1, n))
}
