package grpclimit_test

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestWaitingRetryInfoPasses calls under random rules (every algorithm,
// costs, shadow rules, periods that are not whole milliseconds) on a clock
// that moves at random; on each ResourceExhausted it checks the RetryInfo
// (present, positive), then waits exactly its delay and calls again, which
// must pass: the client was told to wait that long.
func TestWaitingRetryInfoPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	algs := []func(redlimit.Limit) redlimit.Limit{
		func(l redlimit.Limit) redlimit.Limit { return l.FixedWindow() },
		func(l redlimit.Limit) redlimit.Limit { return l.SlidingWindow() },
		func(l redlimit.Limit) redlimit.Limit { return l.SlidingLog() },
		func(l redlimit.Limit) redlimit.Limit { return l.TokenBucket(l.Count) },
		func(l redlimit.Limit) redlimit.Limit { return l.TokenBucket(1 + l.Count/2) },
	}
	periods := []time.Duration{time.Second, 1500 * time.Millisecond, 333333 * time.Microsecond, 7*time.Second + 777*time.Microsecond, 10 * time.Millisecond}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	for run := range 60 {
		clock := redlimittest.NewClock(time.Now().Truncate(time.Hour).Add(time.Duration(rng.IntN(1000000)) * time.Microsecond))
		var s redlimit.Limiter
		if run%2 == 0 {
			ms, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			s = ms
		} else {
			s = rulesettest.NewStores(t, "grpclimit", clock.Now).Redis
		}
		var rules []grpclimit.Rule
		for i := range 1 + rng.IntN(3) {
			p := periods[rng.IntN(len(periods))]
			l := algs[rng.IntN(len(algs))](redlimit.Per(int64(1+rng.IntN(10)), p))
			rules = append(rules, grpclimit.Rule{
				Name: "r" + strconv.Itoa(i), Limit: l, Key: grpclimit.Static("k"),
				Cost: 1 + rng.Int64N(l.Max()), Shadow: i > 0 && rng.IntN(4) == 0,
			})
		}
		log, _ := newLogger()
		in := mustNew(t, s, grpclimit.Options{Logger: log}, rules...)
		unary := in.Unary()
		do := func() error { _, err := unary(ctx, nil, info, ok); return err }
		for step := range 80 {
			clock.Advance(time.Duration(rng.IntN(1500000)) * time.Microsecond)
			err := do()
			if err == nil {
				continue
			}
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("run %d step %d: %v", run, step, err)
			}
			d, ok := grpclimit.RetryDelay(err)
			if !ok || d <= 0 {
				t.Fatalf("run %d step %d: RetryInfo %v, %v: %v", run, step, d, ok, err)
			}
			clock.Advance(d)
			if err := do(); err != nil {
				t.Fatalf("run %d step %d: rules %v: denied again after waiting the RetryInfo delay %v: %v", run, step, rules, d, err)
			}
		}
	}
}
