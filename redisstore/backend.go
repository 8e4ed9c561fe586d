package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
)

// backend runs the decision script on one Redis client library.
type backend interface {
	// eval runs a script with EVALSHA, falling back to EVAL when Redis
	// answers NOSCRIPT, and returns its integer array reply.
	eval(ctx context.Context, sc script, keys, args []string) ([]int64, error)
	// sharded reports whether keys with different hash tags may live on
	// different servers (Redis Cluster, a go-redis Ring).
	sharded() bool
}

// script names one of the store's scripts.
type script int

const (
	decideScript script = iota // scriptSource
	nodesScript                // nodesSource
	firstSingle                // singleSources[redlimit.FixedWindow], then the other algorithms in order
	numScripts   = firstSingle + script(redlimit.TokenBucket-redlimit.FixedWindow) + 1
)

// singleScript names the script that allows or peeks at one limit of a.
func singleScript(a redlimit.Algorithm) script {
	return firstSingle + script(a-redlimit.FixedWindow)
}

// scriptSources returns the source of every script, by name.
func scriptSources() [numScripts]string {
	var src [numScripts]string
	src[decideScript], src[nodesScript] = scriptSource, nodesSource
	for a := redlimit.FixedWindow; a <= redlimit.TokenBucket; a++ {
		src[singleScript(a)] = singleSources[a]
	}
	return src
}

type rueidisBackend struct {
	c       rueidis.Client
	scripts [numScripts]*rueidis.Lua
}

func newRueidisBackend(c rueidis.Client) *rueidisBackend {
	b := &rueidisBackend{c: c}
	for i, src := range scriptSources() {
		b.scripts[i] = rueidis.NewLuaScript(src)
	}
	return b
}

func (b *rueidisBackend) eval(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	resp := b.scripts[sc].Exec(ctx, b.c, keys, args)
	if err := resp.Error(); err != nil {
		return nil, err
	}
	arr, err := resp.ToArray()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", redlimit.ErrBadReply, err)
	}
	out := make([]int64, len(arr))
	for i := range arr {
		if out[i], err = arr[i].AsInt64(); err != nil {
			return nil, fmt.Errorf("%w: element %d: %v", redlimit.ErrBadReply, i, err)
		}
	}
	return out, nil
}

func (b *rueidisBackend) sharded() bool { return b.c.Mode() == rueidis.ClientModeCluster }

type goRedisBackend struct {
	c       redis.UniversalClient
	scripts [numScripts]*redis.Script
}

func newGoRedisBackend(c redis.UniversalClient) *goRedisBackend {
	b := &goRedisBackend{c: c}
	for i, src := range scriptSources() {
		b.scripts[i] = redis.NewScript(src)
	}
	return b
}

func (b *goRedisBackend) eval(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = a
	}
	reply, err := b.scripts[sc].Run(ctx, b.c, keys, argv...).Result()
	if err != nil {
		return nil, err
	}
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T, want an array", redlimit.ErrBadReply, reply)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T, want an integer", redlimit.ErrBadReply, i, v)
		}
		out[i] = n
	}
	return out, nil
}

func (b *goRedisBackend) sharded() bool {
	_, single := b.c.(*redis.Client)
	return !single
}
