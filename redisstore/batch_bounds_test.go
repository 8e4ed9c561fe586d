package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// TestBatchRunsMatchAtBounds is TestBatchRunsMatchCallsOneByOne driven to
// the bounds: counts of 1, 2, 3, about the sliding log's trim interval and
// up to redlimit.MaxLogCount and redlimit.MaxCount, periods from
// redlimit.MinPeriod to redlimit.MaxPeriod, costs of 1, the count and just
// above it and redlimit.MaxCost, runs of up to 64 decisions on one key
// (the batch cap) with peeks among them and the key's count changed within
// the run, and a clock that stays, steps by microseconds, by periods, and
// jumps years forward and back. Each batch is compared decision by
// decision with the same calls made one by one without batching and with
// the memory store, and every key's state after it by a peek of each.
func TestBatchRunsMatchAtBounds(t *testing.T) {
	const year = 365 * 24 * time.Hour
	bases := []redlimit.Limit{
		redlimit.Per(1, time.Millisecond).SlidingLog(),
		redlimit.Per(2, 3*time.Millisecond).SlidingLog(),
		redlimit.Per(3, time.Second).SlidingLog(),
		redlimit.Per(8, 7*time.Millisecond).SlidingLog(),
		redlimit.Per(9, redlimit.MaxPeriod).SlidingLog(),
		redlimit.Per(redlimit.MaxLogCount, time.Millisecond).SlidingLog(),
		redlimit.Per(redlimit.MaxLogCount, redlimit.MaxPeriod).SlidingLog(),
		redlimit.Per(1, time.Millisecond).FixedWindow(),
		redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).FixedWindow(),
		redlimit.Per(2, time.Millisecond).SlidingWindow(),
		redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).SlidingWindow(),
		redlimit.Per(1, time.Millisecond).TokenBucket(1),
		redlimit.Per(redlimit.MaxCount, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount),
	}
	maxOf := func(l redlimit.Limit) int64 {
		if l.Algorithm == redlimit.SlidingLog {
			return redlimit.MaxLogCount
		}
		return redlimit.MaxCount
	}
	// variant gives l another count (and burst), under the same state.
	variant := func(rng *rand.Rand, l redlimit.Limit) redlimit.Limit {
		switch rng.IntN(4) {
		case 0:
			l.Count = 1
		case 1:
			l.Count = max(1, l.Count/2)
		case 2:
			l.Count = min(maxOf(l), 2*l.Count+1)
		case 3:
			l.Count = 1 + rng.Int64N(min(maxOf(l), 3*l.Count))
		}
		if l.Algorithm == redlimit.TokenBucket {
			l.Burst = 1 + rng.Int64N(l.Count)
		}
		return l
	}
	cost := func(rng *rand.Rand, l redlimit.Limit) int64 {
		var c int64
		switch rng.IntN(8) {
		case 0, 1:
			c = 1
		case 2:
			c = l.Max()
		case 3:
			c = l.Max() + 1
		case 4:
			c = redlimit.MaxCost
		case 5:
			c = l.Max() - 1
		default:
			c = 1 + rng.Int64N(min(l.Max()+1, 20))
		}
		return min(max(c, 1), redlimit.MaxCost)
	}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 31))
			start := time.Unix(1_700_000_000, 123456000)
			clock := newPacedClock(start)
			mem := memoryOn(t, clock.Now)
			batched, alone := batchedAndAlone(t, d, clock)
			ctx := context.Background()
			keys := []string{"a", "b", "c"}
			if d.cluster {
				keys = keys[:1] // a batch is of one slot
			}
			var history []string
			fatalf := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d: %s\nlast batches:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-6):], "\n"))
			}
			var decisions, allowed int
			for round := range 250 {
				clock.keepUp()
				var step time.Duration
				switch r := rng.IntN(20); {
				case r < 5:
				case r < 10:
					step = time.Duration(rng.IntN(2000)) * time.Microsecond
				case r < 14:
					step = time.Duration(rng.IntN(20)) * time.Millisecond
				case r < 16:
					step = bases[rng.IntN(len(bases))].Period
				case r < 18:
					step = time.Duration(1+rng.IntN(3)) * year
				default:
					step = -time.Duration(rng.Int64N(int64(4 * year)))
				}
				// The clock stays within 2001..2150: µs since the epoch
				// stay far below 2^53.
				if now := clock.Now().Add(step); now.Before(time.Unix(1e9, 0)) || now.After(time.Unix(5.6e9, 0)) {
					step = -step
				}
				clock.Advance(step)
				if step < 0 {
					clock.resync()
				}
				n := 1 + rng.IntN(64)
				reqs := make([]redlimit.Request, 0, n)
				var peek []bool
				used := map[redlimit.Limit]bool{}
				for len(reqs) < n {
					l := bases[rng.IntN(len(bases))]
					key := keys[rng.IntN(len(keys))]
					run := 1 + rng.IntN(4)
					if rng.IntN(4) == 0 {
						run = 1 + rng.IntN(64)
					}
					// A third of the runs are of identical requests: one
					// entry of the batch script, answered in segments.
					identical := rng.IntN(3) == 0
					for j := range min(run, n-len(reqs)) {
						if identical && j > 0 {
							reqs, peek = append(reqs, reqs[len(reqs)-1]), append(peek, peek[len(peek)-1])
							continue
						}
						v := l
						if rng.IntN(4) == 0 {
							v = variant(rng, l)
						}
						used[l] = true
						// A debit (decided alone, as AllowAll of one
						// request) now and then, between runs.
						r := redlimit.Request{Key: key, Limit: v, Cost: cost(rng, v), Debit: rng.IntN(16) == 0}
						reqs, peek = append(reqs, r), append(peek, !r.Debit && rng.IntN(5) == 0)
					}
				}
				ds := make([][]redlimit.Request, len(reqs))
				for i := range reqs {
					ds[i] = reqs[i : i+1]
				}
				var desc strings.Builder
				fmt.Fprintf(&desc, "round %d at %s (step %s):", round, clock.Now().UTC().Format(time.RFC3339Nano), step)
				for i, r := range reqs {
					fmt.Fprintf(&desc, "\n  %d: %s %s cost %d peek %v debit %v", i, r.Key, r.Limit, r.Cost, peek[i], r.Debit)
				}
				history = append(history, desc.String())
				out, err := batched.DecideMixedBatch(ctx, ds, peek, false)
				if err != nil {
					fatalf("round %d: batch: %v", round, err)
				}
				for i, r := range reqs {
					var want, inMem redlimit.Result
					var err1, err2 error
					got := []redlimit.Result{out[i][0]}
					if r.Debit {
						var d1, d2 redlimit.Decision
						d1, err1 = alone.AllowAll(ctx, ds[i])
						d2, err2 = mem.AllowAll(ctx, ds[i])
						if err1 == nil && err2 == nil {
							want, inMem = d1.Results[0], d2.Results[0]
						}
					} else if peek[i] {
						want, err1 = alone.Peek(ctx, r.Key, r.Limit, r.Cost)
						inMem, err2 = mem.Peek(ctx, r.Key, r.Limit, r.Cost)
					} else {
						want, err1 = alone.AllowN(ctx, r.Key, r.Limit, r.Cost)
						inMem, err2 = mem.AllowN(ctx, r.Key, r.Limit, r.Cost)
					}
					if err1 != nil || err2 != nil {
						fatalf("round %d, decision %d: %v, %v", round, i, err1, err2)
					}
					if got[0] != want || got[0] != inMem {
						fatalf("round %d, decision %d of %d (%s %s cost %d, peek %v, debit %v):\nbatch       %+v\none by one  %+v\nmemory      %+v", round, i, len(reqs), r.Key, r.Limit, r.Cost, peek[i], r.Debit, got[0], want, inMem)
					}
					decisions++
					if got[0].Allowed {
						allowed++
					}
				}
				for l := range used {
					for _, key := range keys {
						g, err1 := batched.Peek(ctx, key, l, 1)
						w, err2 := alone.Peek(ctx, key, l, 1)
						m, err3 := mem.Peek(ctx, key, l, 1)
						if err1 != nil || err2 != nil || err3 != nil || g != w || g != m {
							fatalf("round %d: %s %s after the batch: batch %+v (%v), one by one %+v (%v), memory %+v (%v)", round, key, l, g, err1, w, err2, m, err3)
						}
					}
				}
			}
			t.Logf("%d decisions, %d allowed", decisions, allowed)
		})
	}
}

// TestSlidingLogCumWrapsInRuns takes a sliding log's cum (the units
// admitted on its key, counted modulo 2^53, lua/prelude.lua) to a few
// units below 2^53 the way real traffic can: 8192 debits of
// redlimit.MaxCost, each after the last expired. Then random batches of
// runs on the key (counts 1..64 under the key's state, costs up to just
// above the count, peeks) take it across 2^53, with admissions made by
// Admit at the same instants and refunded after the batch. Batches are
// compared with the same calls made one by one and with the memory store,
// and the key's state after each by a peek; at the end the cum must have
// wrapped.
func TestSlidingLogCumWrapsInRuns(t *testing.T) {
	const cumMod = 1 << 53
	debit := redlimit.Per(1, time.Millisecond).SlidingLog()
	counts := []int64{1, 2, 3, 8, 9, 64}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 53))
			clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
			mem := memoryOn(t, clock.Now)
			batched, alone := batchedAndAlone(t, d, clock)
			stores := []redlimit.Refunder{batched, alone, mem}
			ctx := context.Background()
			const key = "w"
			top := func(s *redisstore.Store) int64 {
				rk := s.KeyOf(key, debit)
				out := d.do(t, rk, "ZRANGE", rk, "-1", "-1")
				v, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
				if err != nil {
					t.Fatalf("%s's newest member %q: %v", rk, out, err)
				}
				return v
			}
			gap := int64(1 + rng.IntN(40))
			for i := range cumMod / redlimit.MaxCost {
				cost := int64(redlimit.MaxCost)
				if i == cumMod/redlimit.MaxCost-1 {
					cost -= gap
				}
				for _, s := range stores {
					dec, err := s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: debit, Cost: cost, Debit: true}})
					if err != nil || dec.Allowed {
						t.Fatalf("debit %d: %+v, %v", i, dec, err)
					}
				}
				clock.Advance(2 * time.Millisecond)
			}
			for _, s := range []*redisstore.Store{batched, alone} {
				if c := top(s); c != cumMod-gap {
					t.Fatalf("the newest cum is %d, not 2^53 - %d", c, gap)
				}
			}
			for round := range 150 {
				clock.keepUp()
				if rng.IntN(8) == 0 {
					clock.Advance(-time.Duration(rng.IntN(500)) * time.Microsecond)
					clock.resync()
				} else {
					clock.Advance(time.Duration(rng.IntN(1500)) * time.Microsecond)
				}
				l := debit
				l.Count = counts[rng.IntN(len(counts))]
				var grants []*redlimit.Grant
				if rng.IntN(3) == 0 {
					req := []redlimit.Request{{Key: key, Limit: l, Cost: 1 + rng.Int64N(l.Count)}}
					var want redlimit.Decision
					for i, s := range stores {
						g, err := s.Admit(ctx, req)
						if err != nil {
							t.Fatal(err)
						}
						if i > 0 && g.Decision.Results[0] != want.Results[0] {
							t.Fatalf("seed %d, round %d: admit %+v: %+v, %T %+v", seed, round, req[0], want, s, g.Decision)
						}
						want = g.Decision
						grants = append(grants, g)
					}
				}
				reqs := make([]redlimit.Request, 1+rng.IntN(64))
				peek := make([]bool, len(reqs))
				for i := range reqs {
					v := l
					if rng.IntN(4) == 0 {
						v.Count = counts[rng.IntN(len(counts))]
					}
					reqs[i] = redlimit.Request{Key: key, Limit: v, Cost: 1 + rng.Int64N(v.Count+1)}
					peek[i] = rng.IntN(5) == 0
				}
				got, err := batched.DecideBatch(ctx, reqs, peek)
				if err != nil {
					t.Fatalf("seed %d, round %d: %v", seed, round, err)
				}
				for i, r := range reqs {
					want, inMem, err := oneByOne(ctx, alone, mem, r, peek[i])
					if err != nil {
						t.Fatal(err)
					}
					if got[i] != want || got[i] != inMem {
						t.Fatalf("seed %d, round %d, decision %d of %d (%s cost %d, peek %v), gap %d:\nbatch       %+v\none by one  %+v\nmemory      %+v", seed, round, i, len(reqs), r.Limit, r.Cost, peek[i], gap, got[i], want, inMem)
					}
				}
				if grants != nil {
					back := []int64{rng.Int64N(grants[0].Requests[0].Cost + 1)}
					for i, g := range grants {
						if err := stores[i].Refund(ctx, g, back); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, c := range counts {
					v := debit
					v.Count = c
					var res [3]redlimit.Result
					for i, s := range stores {
						if res[i], err = s.Peek(ctx, key, v, 1); err != nil {
							t.Fatal(err)
						}
					}
					if res[0] != res[1] || res[0] != res[2] {
						t.Fatalf("seed %d, round %d, gap %d: %s after the batch: batch %+v, one by one %+v, memory %+v", seed, round, gap, v, res[0], res[1], res[2])
					}
				}
			}
			for _, s := range []*redisstore.Store{batched, alone} {
				if c := top(s); c > cumMod/2 {
					t.Fatalf("the newest cum is %d: it did not wrap", c)
				}
			}
		})
	}
}

// TestSlidingLogTrimBoundedPerCall: a log of thousands of expired entries
// (3000 admissions under redlimit.MaxLogCount, then a period without
// traffic) is drained by later writes under counts of 1, 2, 3, 8 and
// redlimit.MaxLogCount on the same key, one by one and in batch runs,
// with costs up to the count and just above it (denials, whose retry-after
// searches the log), while each call's work stays bounded: at most 7 +
// 19 Redis commands per decision inside the script (two reads, then the
// trim, the write and the TTL; a denial's search by rank, with at most
// about log2(count) + 2 probes), at most
// LOG_TRIM_MOST - 1 = 15 members trimmed per decision (a batch's run trims
// what its decisions one by one would) and at most one added. Every
// answer matches the memory store's (no live entry is lost), and the log
// ends within its live entries and a few expired ones.
func TestSlidingLogTrimBoundedPerCall(t *testing.T) {
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 15))
	clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
	mem := memoryOn(t, clock.Now)
	opts := []redisstore.Option{redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(10 * time.Minute), redisstore.WithPrefix(prefix(t))}
	alone, err := redisstore.New(client, append(opts, redisstore.WithBatching(false))...)
	if err != nil {
		t.Fatal(err)
	}
	batched, err := redisstore.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const key = "k"
	big := redlimit.Per(redlimit.MaxLogCount, time.Second).SlidingLog()
	rk := alone.KeyOf(key, big)
	card := func() int64 {
		out, err := srv.Do("ZCARD", rk)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const fill = 3000
	for i := range fill {
		clock.Advance(100 * time.Microsecond)
		r1, err1 := alone.AllowN(ctx, key, big, 1)
		r2, err2 := mem.AllowN(ctx, key, big, 1)
		if err1 != nil || err2 != nil || !r1.Allowed || r1 != r2 {
			t.Fatalf("fill %d: %+v (%v), memory %+v (%v)", i, r1, err1, r2, err2)
		}
	}
	// A denial that searches the full log: the 2000th live unit.
	deny := big
	deny.Count = fill - 1
	r1, err1 := alone.AllowN(ctx, key, deny, 1000)
	r2, err2 := mem.AllowN(ctx, key, deny, 1000)
	if err1 != nil || err2 != nil || r1.Allowed || r1 != r2 {
		t.Fatalf("denial on the full log: %+v (%v), memory %+v (%v)", r1, err1, r2, err2)
	}
	if n := card(); n < fill {
		t.Fatalf("%d members after %d admissions at distinct instants", n, fill)
	}
	clock.Advance(2 * time.Second)

	counts := []int64{1, 2, 3, 8, redlimit.MaxLogCount}
	most := map[string]float64{}
	calls, drained := 0, -1
	for round := 0; round < 1500 && (drained < 0 || round < drained+100); round++ {
		clock.keepUp()
		clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		l := big
		l.Count = counts[rng.IntN(len(counts))]
		n := 1
		if rng.IntN(3) == 0 {
			n = 2 + rng.IntN(8)
		}
		reqs := make([]redlimit.Request, n)
		peek := make([]bool, n)
		for i := range reqs {
			reqs[i] = redlimit.Request{Key: key, Limit: l, Cost: 1 + rng.Int64N(min(l.Count+1, 12))}
			peek[i] = n > 1 && rng.IntN(5) == 0
		}
		members := card()
		before := innerCommands(t, srv)
		var got []redlimit.Result
		if n == 1 {
			r, err := alone.AllowN(ctx, key, l, reqs[0].Cost)
			if err != nil {
				t.Fatal(err)
			}
			got = []redlimit.Result{r}
		} else if got, err = batched.DecideBatch(ctx, reqs, peek); err != nil {
			t.Fatal(err)
		}
		after := innerCommands(t, srv)
		total := 0.0
		for name, c := range after {
			c -= before[name]
			total += c
			most[name] = max(most[name], c)
		}
		now := card()
		calls++
		if total > float64(7+19*n) || now < members-15*int64(n) || now > members+1 {
			t.Fatalf("seed %d, round %d (%d decisions under %s): %v Redis commands, %d members to %d", seed, round, n, l, total, members, now)
		}
		for i, r := range reqs {
			var want redlimit.Result
			if peek[i] {
				want, err = mem.Peek(ctx, key, r.Limit, r.Cost)
			} else {
				want, err = mem.AllowN(ctx, key, r.Limit, r.Cost)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != want {
				t.Fatalf("seed %d, round %d, decision %d of %d (%s cost %d, peek %v): redis %+v, memory %+v", seed, round, i, n, r.Limit, r.Cost, peek[i], got[i], want)
			}
		}
		if drained < 0 && now <= 2*8+16 {
			drained = round
		}
	}
	if drained < 0 {
		t.Fatalf("seed %d: %d members after %d calls: the expired entries were not drained", seed, card(), calls)
	}
	t.Logf("drained after %d calls; most commands per call by name: %v; %d members at the end", drained, most, card())
}

// TestHotSlidingLogBatchesExact: 64 callers on one sliding log, at one
// frozen instant, with costs of 1 to 4 and peeks, their decisions batched
// (runs of one key, put together by the store from concurrent calls) on a
// log that already holds live entries at 100 earlier instants. At one
// instant the decisions' order is the batches', unknown here, but the
// decisions are bounded: the admitted costs sum to at most the count, every
// denial and peek saw no fewer units than there were at the start nor
// more than at the end, and a denial of cost n means the end's remaining
// is below n. The log written is then the memory store's after the same
// fill and the admitted units at that instant, by Peek of every cost.
func TestHotSlidingLogBatchesExact(t *testing.T) {
	const (
		workers = 64
		tries   = 20
		fill    = 100
		count   = 900
	)
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
	mem := memoryOn(t, clock.Now)
	rs, err := redisstore.New(client, redisstore.WithClock(clock.Now), redisstore.WithTTLMargin(10*time.Minute), redisstore.WithPrefix(prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	l := redlimit.Per(count, time.Hour).SlidingLog()
	for i := range fill {
		clock.Advance(time.Duration(1+i%7) * time.Second)
		for _, st := range []redlimit.Limiter{rs, mem} {
			if r, err := st.AllowN(ctx, "hot", l, int64(1+i%3)); err != nil || !r.Allowed {
				t.Fatalf("fill %d: %+v, %v", i, r, err)
			}
		}
	}
	start, _ := rs.Peek(ctx, "hot", l, 1)
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	type call struct {
		cost int64
		peek bool
		res  redlimit.Result
	}
	calls := make([][]call, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range tries {
				c := call{cost: 1 + rng.Int64N(4), peek: rng.IntN(5) == 0}
				var err error
				if c.peek {
					c.res, err = rs.Peek(ctx, "hot", l, c.cost)
				} else {
					c.res, err = rs.AllowN(ctx, "hot", l, c.cost)
				}
				if err != nil {
					t.Error(err)
					return
				}
				calls[w] = append(calls[w], c)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var admitted int64
	for _, cs := range calls {
		for _, c := range cs {
			if c.res.Allowed && !c.peek {
				admitted += c.cost
			}
		}
	}
	// Remaining is what is left after an allowed request, the units the
	// request found otherwise.
	first := start.Remaining + 1
	end := first - admitted
	if end < 0 {
		t.Fatalf("admitted %d units with %d remaining", admitted, first)
	}
	for _, cs := range calls {
		for _, c := range cs {
			if found := c.res.Remaining + boolCost(c.res.Allowed, c.cost); found > first || found < end || c.res.Allowed && found-c.cost < end {
				t.Errorf("%+v: found %d remaining, outside %d..%d", c, found, end, first)
			}
			if !c.res.Allowed && c.cost <= end {
				t.Errorf("%+v denied, with %d remaining at the end", c, end)
			}
		}
	}
	if admitted > 0 {
		if r, err := mem.AllowN(ctx, "hot", l, admitted); err != nil || !r.Allowed {
			t.Fatalf("memory: %+v, %v", r, err)
		}
	}
	for n := int64(1); n <= count+1; n++ {
		r1, err1 := rs.Peek(ctx, "hot", l, n)
		r2, err2 := mem.Peek(ctx, "hot", l, n)
		if err1 != nil || err2 != nil || r1 != r2 {
			t.Fatalf("peek of %d after %d admitted units: redis %+v (%v), memory %+v (%v)", n, admitted, r1, err1, r2, err2)
		}
	}
	t.Logf("%d units admitted of %d remaining, in %d script calls", admitted, first, scriptCalls(t, srv))
}

// boolCost is cost if b, and 0 otherwise.
func boolCost(b bool, cost int64) int64 {
	if b {
		return cost
	}
	return 0
}

// TestSlidingLogRefundsAroundRuns: Admit's admissions on a sliding log, at
// the instants of batch runs on the same key (merged into the runs'
// entries), refunded in part or whole later, in any order, after more runs
// and trims (counts of 1 to 20 under one period, so trims come every 1
// to 8 units). Batch runs are compared with the same calls one by one and
// with the memory store, refunds by every answer after them, and the log
// by a peek of every cost after each round.
func TestSlidingLogRefundsAroundRuns(t *testing.T) {
	const period = 20 * time.Millisecond
	counts := []int64{1, 2, 3, 8, 20}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 4))
			clock := newPacedClock(time.Unix(1_700_000_000, 123456000))
			mem := memoryOn(t, clock.Now)
			batched, alone := batchedAndAlone(t, d, clock)
			stores := []redlimit.Refunder{batched, alone, mem}
			ctx := context.Background()
			const key = "k"
			var grants [][]*redlimit.Grant // per admission, one grant per store
			refunds := 0
			for round := range 400 {
				clock.keepUp()
				if rng.IntN(8) == 0 {
					clock.Advance(-time.Duration(rng.IntN(3000)) * time.Microsecond)
					clock.resync()
				} else {
					clock.Advance(time.Duration(rng.IntN(8000)) * time.Microsecond)
				}
				l := redlimit.Per(counts[rng.IntN(len(counts))], period).SlidingLog()
				if rng.IntN(2) == 0 {
					req := []redlimit.Request{{Key: key, Limit: l, Cost: 1 + rng.Int64N(l.Count)}}
					var gs []*redlimit.Grant
					for i, s := range stores {
						g, err := s.Admit(ctx, req)
						if err != nil {
							t.Fatal(err)
						}
						if i > 0 && g.Decision.Results[0] != gs[0].Decision.Results[0] {
							t.Fatalf("seed %d, round %d: admit %+v: %+v, store %d %+v", seed, round, req[0], gs[0].Decision, i, g.Decision)
						}
						gs = append(gs, g)
					}
					if gs[0].Decision.Allowed {
						grants = append(grants, gs)
					}
				}
				reqs := make([]redlimit.Request, 1+rng.IntN(20))
				peek := make([]bool, len(reqs))
				for i := range reqs {
					v := l
					v.Count = counts[rng.IntN(len(counts))]
					reqs[i] = redlimit.Request{Key: key, Limit: v, Cost: 1 + rng.Int64N(v.Count+1)}
					peek[i] = rng.IntN(5) == 0
				}
				got, err := batched.DecideBatch(ctx, reqs, peek)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range reqs {
					var want, inMem redlimit.Result
					var err1, err2 error
					if peek[i] {
						want, err1 = alone.Peek(ctx, key, r.Limit, r.Cost)
						inMem, err2 = mem.Peek(ctx, key, r.Limit, r.Cost)
					} else {
						want, err1 = alone.AllowN(ctx, key, r.Limit, r.Cost)
						inMem, err2 = mem.AllowN(ctx, key, r.Limit, r.Cost)
					}
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					if got[i] != want || got[i] != inMem {
						t.Fatalf("seed %d, round %d, decision %d of %d (%s cost %d, peek %v), after %d refunds:\nbatch       %+v\none by one  %+v\nmemory      %+v", seed, round, i, len(reqs), r.Limit, r.Cost, peek[i], refunds, got[i], want, inMem)
					}
				}
				if len(grants) > 0 && rng.IntN(2) == 0 {
					j := len(grants) - 1 - rng.IntN(min(3, len(grants))) // a recent one, mostly live
					gs := grants[j]
					grants = append(grants[:j], grants[j+1:]...)
					back := []int64{rng.Int64N(gs[0].Requests[0].Cost + 1)}
					for i, g := range gs {
						if err := stores[i].Refund(ctx, g, back); err != nil {
							t.Fatal(err)
						}
					}
					refunds++
				}
				for n := int64(1); n <= 21; n++ {
					v := redlimit.Per(20, period).SlidingLog()
					var res [3]redlimit.Result
					for i, s := range stores {
						if res[i], err = s.Peek(ctx, key, v, n); err != nil {
							t.Fatal(err)
						}
					}
					if res[0] != res[1] || res[0] != res[2] {
						t.Fatalf("seed %d, round %d, after %d refunds: peek of %d: batch %+v, one by one %+v, memory %+v", seed, round, refunds, n, res[0], res[1], res[2])
					}
				}
			}
			t.Logf("%d refunds", refunds)
		})
	}
}

// TestSlidingLogRefundThenClockBack: a refund that takes out a sliding
// log's newest entry leaves expired for good what had expired at that
// entry's time, as the memory store does (it trims them when it adds the
// entry): with the clock then back before that time, they stay expired.
// Redis counted them again (7 remaining where memory had 17), which
// TestSlidingLogRefundsAroundRuns found in about one run in twenty (a
// peek or a decision of Redis's stores below memory's). A group's refund
// on Cluster (AllowAll) still leaves the log as it was
// (TestModelRegressions' "cluster refund keeps a sliding log's trim").
func TestSlidingLogRefundThenClockBack(t *testing.T) {
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			clock := newPacedClock(time.Unix(1_700_000_000, 0))
			batched, alone := batchedAndAlone(t, d, clock)
			stores := []redlimit.Refunder{batched, alone, memoryOn(t, clock.Now)}
			ctx := context.Background()
			lim := redlimit.Per(20, 20*time.Millisecond).SlidingLog()
			admit := func(cost int64) []*redlimit.Grant {
				t.Helper()
				var gs []*redlimit.Grant
				for i, s := range stores {
					g, err := s.Admit(ctx, []redlimit.Request{{Key: "k", Limit: lim, Cost: cost}})
					if err != nil || !g.Allowed {
						t.Fatalf("store %d: admit %d: %+v, %v", i, cost, g, err)
					}
					gs = append(gs, g)
				}
				return gs
			}
			admit(10)
			clock.Advance(15 * time.Millisecond)
			admit(2)
			clock.Advance(6 * time.Millisecond)
			for i, g := range admit(1) { // the entry of 10 expires at its time
				if err := stores[i].Refund(ctx, g, []int64{1}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(-2 * time.Millisecond)
			for i, s := range stores {
				r, err := s.Peek(ctx, "k", lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if r.Remaining != 17 {
					t.Errorf("store %d: %+v after the refund, 2 ms before its time; want 17 remaining (the 10 expired for good)", i, r)
				}
			}
		})
	}
}
