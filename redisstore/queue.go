package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redlimit/redlimit"
)

var _ redlimit.Queuer = (*Store)(nil)

// Queue implements [redlimit.Queuer] in one script call, at the script's
// instant: every process sharing the Redis server queues in one line.
func (s *Store) Queue(ctx context.Context, key string, limit redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	if err := redlimit.ValidateQueue(key, limit, n, maxWait); err != nil {
		return redlimit.Turn{}, fmt.Errorf("redisstore: %w", err)
	}
	req := redlimit.Request{Key: key, Limit: limit, Cost: n}
	w := s.newWire()
	w.queue(kindQueue, s.key(hashTag(key), limit), req, maxWait.Microseconds())
	r, err := s.call(ctx, "queue", &w)
	if err != nil {
		return redlimit.Turn{}, err
	}
	v := r.values(5)
	if !r.ok() || v[0] < 0 || v[0] > 1 {
		return redlimit.Turn{}, badReply("queue", r)
	}
	res := redlimit.Turn{Key: key, Limit: limit, Cost: n, TAT: v[4]}
	if v[0] == 1 {
		res.Result = resultOf(req, true, v[1], 0, v[3])
		res.Delay = fromMicros(v[2])
	} else {
		res.Result = resultOf(req, false, v[1], v[2], v[3])
	}
	return res, nil
}

// Unqueue implements [redlimit.Queuer] in one script call.
func (s *Store) Unqueue(ctx context.Context, q redlimit.Turn) (bool, error) {
	if err := redlimit.ValidateQueue(q.Key, q.Limit, q.Cost, 0); err != nil {
		return false, fmt.Errorf("redisstore: %w", err)
	}
	req := redlimit.Request{Key: q.Key, Limit: q.Limit, Cost: q.Cost}
	w := s.newWire()
	w.queue(kindUnqueue, s.key(hashTag(q.Key), q.Limit), req, q.TAT)
	r, err := s.call(ctx, "unqueue", &w)
	if err != nil {
		return false, err
	}
	v := r.values(1)
	if !r.ok() || v[0] < 0 || v[0] > 1 {
		return false, badReply("unqueue", r)
	}
	return v[0] == 1, nil
}
