package redisstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

// TestBatchRunsMatchCallsOneByOne checks the batch script's runs (several
// decisions on one key, decided on the state read once and written once)
// against the same decisions made one by one, without batching, at the
// same instant: random batches over three keys, every algorithm, calendar
// limits of two zones and a plain window of their period on the same
// keys, limits whose count changes under the state, costs up to a little
// above the limit, allows and peeks, a clock that sometimes steps back.
// Every answer must be the same, and so must every key's state, which a
// peek of each key after every batch compares.
func TestBatchRunsMatchCallsOneByOne(t *testing.T) {
	bases := []redlimit.Limit{
		redlimit.Per(6, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(7, time.Second).SlidingLog(),
		redlimit.Per(10, time.Second).SlidingWindow(),
		redlimit.Per(3, 70*time.Millisecond).SlidingWindow(),
		redlimit.Per(3, time.Second).TokenBucket(4),
		redlimit.Per(7, 100*time.Millisecond).TokenBucket(2),
		redlimit.PerCalendar(40, redlimit.Day, "Europe/Berlin"),
		redlimit.PerCalendar(40, redlimit.Day, "Asia/Tokyo"),
		redlimit.Per(40, redlimit.Day.Longest()).FixedWindow(),
	}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 13))
			clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
			batched, alone := batchedAndAlone(t, d, clock)
			ctx := context.Background()
			keys := []string{"a", "b", "c"}
			if d.cluster {
				keys = keys[:1] // a batch is of one slot
			}
			for round := range 300 {
				clock.keepUp()
				if rng.IntN(10) == 0 {
					clock.Advance(-time.Duration(rng.IntN(50)) * time.Millisecond)
				} else {
					clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
				n := 1 + rng.IntN(12)
				reqs := make([]redlimit.Request, 0, n)
				var peek []bool
				for len(reqs) < n {
					l := bases[rng.IntN(len(bases))]
					key := keys[rng.IntN(len(keys))]
					// A run of several requests on the key.
					for range 1 + rng.IntN(5) {
						v := l
						if rng.IntN(4) == 0 {
							v.Count = 2*l.Count + 1
							if v.Algorithm == redlimit.TokenBucket {
								v.Burst = 1 + rng.Int64N(2*l.Burst)
							}
						}
						// Identical requests, one after another, are one
						// entry of the batch script, answered in segments.
						r, p, same := redlimit.Request{Key: key, Limit: v, Cost: 1 + rng.Int64N(v.Count+1)}, rng.IntN(5) == 0, 1
						if rng.IntN(3) == 0 {
							same = 2 + rng.IntN(8)
						}
						for range same {
							reqs, peek = append(reqs, r), append(peek, p)
						}
					}
				}
				got, err := batched.DecideBatch(ctx, reqs, peek)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range reqs {
					var want redlimit.Result
					if peek[i] {
						want, err = alone.Peek(ctx, r.Key, r.Limit, r.Cost)
					} else {
						want, err = alone.AllowN(ctx, r.Key, r.Limit, r.Cost)
					}
					if err != nil {
						t.Fatal(err)
					}
					if got[i] != want {
						t.Fatalf("seed %d, round %d, decision %d of %d (%s %s cost %d, peek %v): batch %+v, one by one %+v", seed, round, i, len(reqs), r.Key, r.Limit, r.Cost, peek[i], got[i], want)
					}
				}
				for _, l := range bases {
					for _, key := range keys {
						g, err1 := batched.Peek(ctx, key, l, 1)
						w, err2 := alone.Peek(ctx, key, l, 1)
						if err1 != nil || err2 != nil || g != w {
							t.Fatalf("seed %d, round %d: %s %s after the batch: %+v (%v), one by one %+v (%v)", seed, round, key, l, g, err1, w, err2)
						}
					}
				}
			}
		})
	}
}

// sameNodeKeys returns n identifiers whose slots differ and are all served
// by one master of the shared cluster, and one identifier served by
// another master.
func sameNodeKeys(t *testing.T, s *redisstore.Store, n int) (keys []string, far string) {
	t.Helper()
	cl := redistest.SharedCluster(t)
	l := redlimit.PerSecond(1).FixedWindow()
	var first *redistest.Server
	slots := map[int]bool{}
	for i := 0; len(keys) < n || far == ""; i++ {
		if i > 10_000 {
			t.Fatal("no identifiers found on one master")
		}
		id := "k" + strconv.Itoa(i)
		rk := s.KeyOf(id, l)
		m, err := cl.MasterFor(rk)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case first == nil:
			first = m
			keys = append(keys, id)
			slots[redisstore.KeySlot(rk)] = true
		case m == first && len(keys) < n && !slots[redisstore.KeySlot(rk)]:
			keys = append(keys, id)
			slots[redisstore.KeySlot(rk)] = true
		case m != first && far == "":
			far = id
		}
	}
	return keys, far
}

// TestMixedBatchesMatchCallsOneByOne checks batches that mix single-limit
// decisions (allows and peeks, in runs on one key) and several-limit
// decisions (AllowAll of one identifier, with debits) against the same
// decisions made one by one, without batching, at the same instant. On
// Cluster the batch goes to one node with keys of several slots (the
// allow-cross-slot-keys script); in one round of three it also holds a key
// of another node, so that the node refuses it before writing anything
// and it is decided again slot by slot. In one round of four it also
// holds decisions on a key whose state the script cannot use (another
// type, text in a token bucket), which fail alone with ErrKeyState, as
// they do one by one. Answers and states must match.
func TestMixedBatchesMatchCallsOneByOne(t *testing.T) {
	bases := []redlimit.Limit{
		redlimit.Per(6, 100*time.Millisecond).FixedWindow(),
		redlimit.Per(7, time.Second).SlidingLog(),
		redlimit.Per(10, time.Second).SlidingWindow(),
		redlimit.Per(3, time.Second).TokenBucket(4),
	}
	for _, d := range []deployment{deployments[0], deployments[2], deployments[3]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 14))
			clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
			batched, alone := batchedAndAlone(t, d, clock)
			ctx := context.Background()
			keys, far := []string{"a", "b", "c", "bad"}, ""
			if d.cluster {
				keys, far = sameNodeKeys(t, batched, 4)
			}
			keys, bad := keys[:3], keys[3]
			for _, s := range []*redisstore.Store{batched, alone} {
				for i, l := range bases {
					k := s.KeyOf(bad, l)
					if i%2 == 0 {
						d.do(t, k, "RPUSH", k, "a list")
					} else {
						d.do(t, k, "SET", k, "not a "+l.Algorithm.String())
					}
				}
			}
			for round := range 200 {
				clock.keepUp()
				if rng.IntN(10) == 0 {
					clock.Advance(-time.Duration(rng.IntN(50)) * time.Millisecond)
				} else {
					clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
				roundKeys := keys
				if far != "" && round%3 == 0 {
					roundKeys = append(slices.Clip(keys), far)
				}
				if round%4 == 0 {
					roundKeys = append(slices.Clip(roundKeys), bad)
				}
				var ds [][]redlimit.Request
				var peek []bool
				for range 2 + rng.IntN(12) {
					key := roundKeys[rng.IntN(len(roundKeys))]
					if rng.IntN(3) == 0 {
						// AllowAll of up to three limits of the key, some debits.
						var reqs []redlimit.Request
						for _, i := range rng.Perm(len(bases))[:1+rng.IntN(3)] {
							l := bases[i]
							reqs = append(reqs, redlimit.Request{Key: key, Limit: l, Cost: 1 + rng.Int64N(l.Count), Debit: rng.IntN(4) == 0})
						}
						ds, peek = append(ds, reqs), append(peek, false)
						continue
					}
					l := bases[rng.IntN(len(bases))]
					for range 1 + rng.IntN(3) {
						// Sometimes identical ones: an entry of the script.
						r, p, same := redlimit.Request{Key: key, Limit: l, Cost: 1 + rng.Int64N(l.Count)}, rng.IntN(5) == 0, 1
						if rng.IntN(3) == 0 {
							same = 2 + rng.IntN(6)
						}
						for range same {
							ds, peek = append(ds, []redlimit.Request{r}), append(peek, p)
						}
					}
				}
				got, errs := batched.DecideMixedBatchEach(ctx, ds, peek, true)
				for i, reqs := range ds {
					var want []redlimit.Result
					var err error
					switch {
					case len(reqs) > 1 || reqs[0].Debit:
						var dec redlimit.Decision
						dec, err = alone.AllowAll(ctx, reqs)
						want = dec.Results
					case peek[i]:
						var r redlimit.Result
						r, err = alone.Peek(ctx, reqs[0].Key, reqs[0].Limit, reqs[0].Cost)
						want = []redlimit.Result{r}
					default:
						var r redlimit.Result
						r, err = alone.AllowN(ctx, reqs[0].Key, reqs[0].Limit, reqs[0].Cost)
						want = []redlimit.Result{r}
					}
					if err != nil || errs[i] != nil {
						if !errors.Is(err, redlimit.ErrKeyState) || !errors.Is(errs[i], redlimit.ErrKeyState) || reqs[0].Key != bad {
							t.Fatalf("seed %d, round %d, decision %d (%+v): batch %v, one by one %v; want ErrKeyState on %q only", seed, round, i, reqs, errs[i], err, bad)
						}
						continue
					}
					if !slices.Equal(got[i], want) {
						t.Fatalf("seed %d, round %d, decision %d of %d (%+v, peek %v): batch %+v, one by one %+v", seed, round, i, len(ds), reqs, peek[i], got[i], want)
					}
				}
				for _, l := range bases {
					for _, key := range roundKeys {
						g, err1 := batched.Peek(ctx, key, l, 1)
						w, err2 := alone.Peek(ctx, key, l, 1)
						if key == bad && errors.Is(err1, redlimit.ErrKeyState) && errors.Is(err2, redlimit.ErrKeyState) {
							continue
						}
						if err1 != nil || err2 != nil || g != w {
							t.Fatalf("seed %d, round %d: %s %s after the batch: %+v (%v), one by one %+v (%v)", seed, round, key, l, g, err1, w, err2)
						}
					}
				}
			}
		})
	}
}

// batchedAndAlone returns two Stores of d on clock, each under a prefix of
// its own: one that batches, one that makes a script call per decision.
// Redis keeps keys ten minutes longer than their times say, so that after
// the clock steps back every store still holds what the explicit time
// says is there.
func batchedAndAlone(t *testing.T, d deployment, clock *pacedClock) (batched, alone *redisstore.Store) {
	t.Helper()
	opts := []redisstore.Option{redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(10 * time.Minute)}
	p := prefix(t)
	batched = d.store(t, append(opts, redisstore.WithPrefix(p+"b:"))...)
	alone = d.store(t, append(opts, redisstore.WithPrefix(p+"a:"), redisstore.WithBatching(false))...)
	return batched, alone
}

// memoryOn returns a memory store on the clock now that never sweeps (so
// that it holds what the explicit time says is there), closed when t ends.
func memoryOn(t *testing.T, now func() time.Time) *memory.Store {
	t.Helper()
	mem, err := memory.New(memory.WithClock(now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

// TestBatchRunLongerThanAnEntry decides 300 identical requests in one run
// of the batch script, more than one entry of it holds (its count is a
// byte, at most 64: the batcher never sends more), for each algorithm:
// they must be answered as one by one, the first admitted down to the
// limit, the others denied.
func TestBatchRunLongerThanAnEntry(t *testing.T) {
	clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
	batched, alone := batchedAndAlone(t, deployments[0], clock)
	ctx := context.Background()
	for _, l := range []redlimit.Limit{
		redlimit.PerMinute(250).FixedWindow(),
		redlimit.PerMinute(250).SlidingLog(),
		redlimit.PerMinute(250).SlidingWindow(),
		redlimit.PerMinute(250).TokenBucket(250),
	} {
		reqs := make([]redlimit.Request, 300)
		for i := range reqs {
			reqs[i] = redlimit.Request{Key: "long", Limit: l, Cost: 1}
		}
		got, err := batched.DecideBatch(ctx, reqs, nil)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		for i, r := range reqs {
			want, err := alone.AllowN(ctx, r.Key, r.Limit, r.Cost)
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != want || want.Allowed != (i < 250) {
				t.Fatalf("%s, decision %d: batch %+v, one by one %+v", l, i, got[i], want)
			}
		}
	}
}

// oneByOne decides r on the unbatched store and the memory store, as a
// peek or as an admission: what a batch's decision must answer.
func oneByOne(ctx context.Context, alone, mem redlimit.Limiter, r redlimit.Request, peek bool) (want, inMem redlimit.Result, err error) {
	var err1, err2 error
	if peek {
		want, err1 = alone.Peek(ctx, r.Key, r.Limit, r.Cost)
		inMem, err2 = mem.Peek(ctx, r.Key, r.Limit, r.Cost)
	} else {
		want, err1 = alone.AllowN(ctx, r.Key, r.Limit, r.Cost)
		inMem, err2 = mem.AllowN(ctx, r.Key, r.Limit, r.Cost)
	}
	return want, inMem, errors.Join(err1, err2)
}
