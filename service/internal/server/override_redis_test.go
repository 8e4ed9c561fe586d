package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/service/internal/config"
)

// Finding 8 on Redis: a limit override of 100,000 a year with a
// hits_addend of 100,000 on the example's /login sliding log (5 an hour)
// made a 12 MB ZSET per user with a one-year TTL, at some 110 ms per script
// call. It is InvalidArgument now, and leaves nothing in Redis. The most the
// default bounds let a client ask of that rule, 5 a year at a cost of 5,
// leaves per user one ZSET of at most 5 entries, for at most a year.
func TestOverrideBoundsOnRedis(t *testing.T) {
	t.Parallel()
	redis := redistest.Shared(t)
	prefix := fmt.Sprintf("ovr%d:", time.Now().UnixNano())
	r := start(t, Options{ConfigPath: filepath.Join("..", "..", "..", "examples", "config"),
		RedisURL: "redis://" + redis.Addr(), RedisPrefix: prefix, Counting: config.CountingAdmission, // the costs are admissions
		Timeout: 5 * time.Second}) // /login is fail_closed: a Redis call slower than the default 50 ms on a loaded machine would answer OVER_LIMIT
	login := func(user string, n uint32, cost uint64) (*pb.RateLimitResponse, error) {
		req := &pb.RateLimitRequest{Domain: "example", Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries:    []*rlpb.RateLimitDescriptor_Entry{{Key: "path", Value: "/login"}, {Key: "user", Value: user}},
			Limit:      &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typepb.RateLimitUnit_YEAR},
			HitsAddend: wrapperspb.UInt64(cost),
		}}}
		return r.client.ShouldRateLimit(context.Background(), req)
	}
	keys := func() []string {
		out, err := redis.Do("KEYS", prefix+"{7:example*") // not the live-node registry
		if err != nil {
			t.Fatal(err)
		}
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}

	const users = 50
	for i := range users {
		_, err := login(fmt.Sprint("user", i), 100_000, 100_000)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "descriptor 0: limit override 100000") {
			t.Fatalf("user %d: got %v, want InvalidArgument naming descriptor 0", i, err)
		}
	}
	if k := keys(); len(k) != 0 {
		t.Fatalf("refused requests left %d keys in Redis: %q", len(k), k)
	}

	for i := range users {
		resp, err := login(fmt.Sprint("user", i), 5, 5)
		if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("user %d at the bound: %v %v", i, resp, err)
		}
	}
	k := keys()
	if len(k) != users {
		t.Fatalf("%d keys for %d users: %q", len(k), users, k)
	}
	year := 365 * 24 * time.Hour
	for _, key := range k {
		card, err := redis.Do("ZCARD", key)
		if err != nil {
			t.Fatal(err)
		}
		pttl, err := redis.Do("PTTL", key)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := redis.Do("MEMORY", "USAGE", key)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(card)
		ms, _ := strconv.ParseInt(pttl, 10, 64)
		bytes, _ := strconv.Atoi(mem)
		if n < 1 || n > 5 || ms <= 0 || time.Duration(ms)*time.Millisecond > year+time.Minute || bytes > 1024 {
			t.Errorf("%s: %d entries, TTL %s, %d bytes; want 1 to 5 entries, at most a year, at most 1 KiB", key, n, time.Duration(ms)*time.Millisecond, bytes)
		}
	}
}
