package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/model"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// modelEnvs returns the environments of a fuzz target on d: the memory
// store (the reference the others are compared with), the Redis store on
// one client and prefix for the whole target, and the model. Each run gets
// keys of its own, and deletes what it wrote when it ends. The client is
// made at the first run, so that a fuzzing coordinator, which runs no
// sequence, starts no server.
//
// The Redis stores do their calendar arithmetic on a host clock that the
// run skews from the clock they decide by (model.Env.HostClock).
//
// The TTL margin keeps every key for an hour of real time, whatever the
// explicit clock does (it jumps years ahead and back): expired state is
// recognised from the stored times, so the answers depend on the explicit
// times alone.
func modelEnvs(tb testing.TB, d deployment) model.NewEnv {
	var (
		once   sync.Once
		client rueidis.Client
		rs     *redisstore.Store
		rb     *redisstore.Store // the batch script's store
		rr     *redisstore.Store // the store of runTarget
		runs   atomic.Int64
	)
	clock := redlimittest.NewClock(redlimittest.T0)
	host := redlimittest.NewClock(redlimittest.T0)
	p := prefix(tb)
	tb.Cleanup(func() {
		if client != nil {
			client.Close()
		}
	})
	connect := func(t testing.TB) {
		addrs := d.addrs(t)
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		if err != nil {
			t.Fatalf("rueidis client for %v: %v", addrs, err)
		}
		s, err := redisstore.New(c, redisstore.WithClock(clock.Now), redisstore.WithHostClock(host.Now), redisstore.WithPrefix(p),
			redisstore.WithTTLMargin(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		b, err := redisstore.New(c, redisstore.WithClock(clock.Now), redisstore.WithHostClock(host.Now), redisstore.WithPrefix(p+"b:"),
			redisstore.WithTTLMargin(time.Hour), redisstore.WithBatchScriptAlways())
		if err != nil {
			t.Fatal(err)
		}
		r, err := redisstore.New(c, redisstore.WithClock(clock.Now), redisstore.WithHostClock(host.Now), redisstore.WithPrefix(p+"r:"),
			redisstore.WithTTLMargin(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		client, rs, rb, rr = c, s, b, r
	}
	return func(t testing.TB) model.Env {
		once.Do(func() { connect(t) })
		if rs == nil {
			t.Fatal("no Redis client (the first run failed to make one)")
		}
		run := runs.Add(1)
		mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		return model.Env{
			Clock:     clock,
			HostClock: host,
			Targets: []model.Target{{Name: "memory", Limiter: mem}, {Name: "redis", Limiter: rs, Split: d.cluster},
				{Name: "redis batch script", Limiter: rb, Split: d.cluster},
				{Name: "redis batch runs", Limiter: &runTarget{s: rr, client: client, clock: clock, oneKey: d.cluster}, Split: d.cluster}},
			Key: func(i int) string { return fmt.Sprintf("r%d.%d", run, i) },
			Close: func(touched []model.Touched) {
				mem.Close()
				// One UNLINK per key: a key's states share its hash tag.
				byKey := make(map[string][]string)
				for _, s := range touched {
					byKey[s.Key] = append(byKey[s.Key], rs.KeyOf(s.Key, s.Limit), rb.KeyOf(s.Key, s.Limit), rr.KeyOf(s.Key, s.Limit))
				}
				var cmds rueidis.Commands
				for _, keys := range byKey {
					if len(keys) > 0 {
						cmds = append(cmds, client.B().Unlink().Key(keys...).Build())
					}
				}
				for _, r := range client.DoMulti(context.Background(), cmds...) {
					if err := r.Error(); err != nil {
						t.Errorf("deleting the run's keys: %v", err)
					}
				}
			},
		}
	}
}

// modelOptions are the options of the model runs on Redis: debits included.
var modelOptions = model.Options{}

// FuzzModel runs operation sequences decoded from the input on the memory
// store, Redis (standalone) and the reference model (see package model),
// and compares every answer. Without -fuzz it runs the seed corpus: fixed
// pseudo-random sequences.
func FuzzModel(f *testing.F) {
	for _, b := range model.Seeds(2, model.SeedCount(80), 1500) {
		f.Add(b)
	}
	newEnv := modelEnvs(f, deployments[0])
	f.Fuzz(func(t *testing.T, data []byte) {
		model.Check(t, newEnv, data, modelOptions)
	})
}

// FuzzModelCluster is FuzzModel on Redis Cluster, where an AllowAll over
// several keys (hash tags) is decided per slot and refunded on a denial.
func FuzzModelCluster(f *testing.F) {
	for _, b := range model.Seeds(3, model.SeedCount(60), 1500) {
		f.Add(b)
	}
	newEnv := modelEnvs(f, deployments[2])
	f.Fuzz(func(t *testing.T, data []byte) {
		model.Check(t, newEnv, data, modelOptions)
	})
}

// TestModelRegressions replays the sequences that found bugs, on Redis
// standalone and Cluster.
func TestModelRegressions(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		model.RunRegressions(t, modelEnvs(t, deployments[0]), modelOptions)
	})
	t.Run("cluster", func(t *testing.T) {
		model.RunRegressions(t, modelEnvs(t, deployments[2]), modelOptions)
	})
}

// TestModelClusterRefundSplit: the one difference between the stores the
// runs allow. A Redis Cluster refund of a full token bucket leaves its
// arrival time at the decision's instant (see refund.go), so that a clock
// that then goes back finds the bucket stricter on the cluster than in
// memory. The run meets it, and passes because the cluster target is
// Split; without Split it fails. (Should the refund give the bucket its
// earlier arrival time back, the second half fails, and Target.Split can
// go.)
func TestModelClusterRefundSplit(t *testing.T) {
	tb := redlimit.Per(1000, time.Second).TokenBucket(10)
	seq := model.Sequence{Start: redlimittest.T0, Ops: []model.Op{
		// Key 0's bucket is full; key 1's cost can never pass: the
		// cluster commits key 0's cost, then refunds it.
		{At: time.Second, Kind: model.AllowAll, Reqs: []model.Req{{Key: 0, Limit: tb, Cost: 2}, {Key: 1, Limit: tb, Cost: 11}}},
		// 50 ms earlier: the memory store finds key 0's bucket full, the
		// cluster 50 ms of arrival time ahead, beyond the 10 ms tolerance.
		{At: 950 * time.Millisecond, Kind: model.AllowAll, Reqs: []model.Req{{Key: 0, Limit: tb, Cost: 1}, {Key: 1, Limit: tb, Cost: 1}}},
	}}
	newEnv := modelEnvs(t, deployments[2])
	var st model.Stats
	env := newEnv(t)
	env.Stats = &st
	if f := model.Replay(env, seq); f != nil {
		t.Fatal(f)
	}
	if st.Split == 0 {
		t.Errorf("the run did not meet the refund's difference: %+v", st)
	}
	env = newEnv(t)
	env.Targets[1].Split = false
	if f := model.Replay(env, seq); f == nil || f.Check != "stores differ" {
		t.Errorf("without Split: %v, want the stores to differ", f)
	}
}
