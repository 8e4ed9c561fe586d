package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
)

// dumpKeyScript returns a key's Redis state as lines: its type, its PTTL,
// then its value: a string's, a hash's fields and values (sorted by field),
// a sorted set's members and scores in order.
const dumpKeyScript = `
local out = {}
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k).ok
  out[#out + 1] = t
  out[#out + 1] = tostring(redis.call('PTTL', k))
  if t == 'string' then
    out[#out + 1] = redis.call('GET', k)
  elseif t == 'hash' then
    local h, fs = redis.call('HGETALL', k), {}
    for i = 1, #h, 2 do fs[#fs + 1] = h[i] .. '=' .. h[i + 1] end
    table.sort(fs)
    for _, f in ipairs(fs) do out[#out + 1] = f end
  elseif t == 'zset' then
    -- A sliding log: every member and score, expired ones included (a
    -- batch's run trims what its calls one by one would, lua/log.lua).
    local z = redis.call('ZRANGE', k, '0', '-1', 'WITHSCORES')
    for i = 1, #z, 2 do out[#out + 1] = z[i] .. '@' .. z[i + 1] end
  end
  out[#out + 1] = '--'
end
return out
`

// keyState is a key's state as dumpKeyScript gives it.
type keyState struct {
	typ   string
	pttl  int64
	value string
}

// dumpKeys returns the states of keys, read at one instant.
func dumpKeys(t *testing.T, srv *redistest.Server, keys ...string) []keyState {
	t.Helper()
	out, err := srv.Do(append([]string{"EVAL", dumpKeyScript, strconv.Itoa(len(keys))}, keys...)...)
	if err != nil {
		t.Fatalf("dump %v: %v", keys, err)
	}
	var states []keyState
	lines := strings.Split(out, "\n")
	for len(lines) > 0 {
		end := slices.Index(lines, "--")
		if end < 2 {
			t.Fatalf("dump %v: %q", keys, out)
		}
		pttl, err := strconv.ParseInt(lines[1], 10, 64)
		if err != nil {
			t.Fatalf("dump %v: %q", keys, out)
		}
		states = append(states, keyState{typ: lines[0], pttl: pttl, value: strings.Join(lines[2:end], " ")})
		lines = lines[end+1:]
	}
	return states
}

// TestBatchEdgesMatchOneByOne checks the batch script's runs against the
// same decisions made one by one, without batching, at the same instant,
// at the edges of the arithmetic that a run's summed request relies on:
// token buckets whose emission interval does not divide the period (and
// bursts up to the largest whose tolerance stays within 2^52 µs, at times
// near 2^52 µs), sliding windows at odd periods (the previous window's
// weight rounded up), runs whose first decision opens a new window (the
// clock stepped to a window's first µs, or its last), costs that split a
// burst or a count evenly among a run's decisions (and one more), peeks
// among allows, limits that differ only in count on one state, and a
// clock that steps back (by up to two periods, ten years at most). Every
// field of every answer must match, one by one's and the memory store's,
// and so must each state's Redis key afterwards: its value byte for byte
// (a sliding log's members and scores, the expired ones its writes have
// not trimmed yet included), its TTL within the real time the rounds took
// and a few ms. BATCH_EDGES_SEED runs a failure's seed again.
func TestBatchEdgesMatchOneByOne(t *testing.T) {
	const tolerance = 1 << 52
	periods := []time.Duration{
		time.Millisecond,
		1001 * time.Microsecond,
		7777 * time.Microsecond,
		999_983 * time.Microsecond,
		time.Hour + time.Microsecond,
		redlimit.MaxPeriod,
	}
	algs := []redlimit.Algorithm{redlimit.FixedWindow, redlimit.SlidingLog, redlimit.SlidingWindow, redlimit.TokenBucket}
	maxCount := func(a redlimit.Algorithm) int64 {
		if a == redlimit.SlidingLog {
			return redlimit.MaxLogCount
		}
		return redlimit.MaxCount
	}
	// limit returns a limit of algorithm a and period p, with a count (and
	// burst) at an edge: small, odd, at the bounds, or random.
	limit := func(rng *rand.Rand, a redlimit.Algorithm, p time.Duration) redlimit.Limit {
		for {
			l := redlimit.Limit{Algorithm: a, Period: p}
			mc := maxCount(a)
			switch rng.IntN(9) {
			case 0:
				l.Count = 1
			case 1:
				l.Count = 2
			case 2:
				l.Count = 3
			case 3:
				l.Count = 7
			case 4:
				l.Count = mc
			case 5:
				l.Count = mc - 1
			case 6:
				l.Count = 1 + rng.Int64N(100)
			case 7:
				l.Count = 1 + rng.Int64N(mc)
			default:
				l.Count = 64 * (1 + rng.Int64N(8))
			}
			if a == redlimit.TokenBucket {
				ei := l.EmissionInterval()
				most := min(int64(redlimit.MaxCount), tolerance/ei)
				switch rng.IntN(7) {
				case 0:
					l.Burst = 1
				case 1:
					l.Burst = min(most, l.Count)
				case 2:
					l.Burst = most
				case 3:
					l.Burst = max(1, most-1)
				case 4:
					l.Burst = 1 + rng.Int64N(min(most, 200))
				case 5:
					l.Burst = 64 * (1 + rng.Int64N(min(most, 8*64)/64+1))
				default:
					l.Burst = 1 + rng.Int64N(most)
				}
			}
			if l.Validate() == nil {
				return l
			}
		}
	}
	// cost returns a cost at an edge of l for a run of m decisions.
	cost := func(rng *rand.Rand, l redlimit.Limit, m int) int64 {
		x := l.Max()
		var c int64
		switch rng.IntN(10) {
		case 0, 1:
			c = 1
		case 2:
			c = x
		case 3:
			c = x + 1
		case 4:
			c = x / int64(m)
		case 5:
			c = x/int64(m) + 1
		case 6:
			c = redlimit.MaxCost
		case 7:
			c = x - 1
		case 8:
			c = x / int64(max(1, m-1))
		default:
			c = 1 + rng.Int64N(min(x+1, 20))
		}
		return min(max(c, 1), redlimit.MaxCost)
	}
	d := deployments[0]
	srv := redistest.Shared(t)
	seed := rand.Uint64()
	if v := os.Getenv("BATCH_EDGES_SEED"); v != "" { // a failure's seed, again
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 24))
	start := time.UnixMicro(1_700_000_000_123_457)
	if rng.IntN(3) == 0 {
		// Near 2^52 µs, where the stores' clock stands still: TATs up to
		// 2^53.
		start = time.UnixMicro(tolerance - int64(rng.IntN(3))*int64(redlimit.MaxPeriod/time.Microsecond) - rng.Int64N(1e9))
	}
	clock := newPacedClock(start)
	mem := memoryOn(t, clock.Now)
	batched, alone := batchedAndAlone(t, d, clock)
	ctx := context.Background()

	type state struct {
		key string
		alg redlimit.Algorithm
		p   time.Duration
	}
	var history []string
	fatalf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (start %d µs): %s\nlast batches:\n%s", seed, start.UnixMicro(), fmt.Sprintf(format, args...), strings.Join(history[max(0, len(history)-4):], "\n"))
	}
	var decisions, allowed, runs int
	var took int64 // the most ms a round's calls took
	const rounds = 300
	for round := range rounds {
		// No keepUp: the keys' TTLs have ten minutes of margin, and the
		// rounds are the same for a seed.
		// A few states for this round, on two keys.
		var sts []state
		for range 1 + rng.IntN(3) {
			sts = append(sts, state{key: string(rune('a' + rng.IntN(2))), alg: algs[rng.IntN(len(algs))], p: periods[rng.IntN(len(periods))]})
		}
		// The clock: still, by a µs, to a window's edge, back.
		now := clock.Now().UnixMicro()
		var step int64
		p := int64(sts[0].p / time.Microsecond)
		switch r := rng.IntN(12); {
		case r < 2:
		case r < 4:
			step = rng.Int64N(3) - 1
		case r < 7:
			// The first µs of the next window, or the last of this one,
			// or one past the first.
			step = (now/p+1)*p - now + rng.Int64N(3) - 1
		case r < 9:
			step = rng.Int64N(2 * p)
		case r < 10:
			step = rng.Int64N(20_000)
		default:
			step = -rng.Int64N(2 * p)
		}
		if now+step < 1e15 {
			step = -step
		}
		clock.Advance(time.Duration(step) * time.Microsecond)

		n := 1 + rng.IntN(64)
		var reqs []redlimit.Request
		var peek []bool
		for len(reqs) < n {
			st := sts[rng.IntN(len(sts))]
			l := limit(rng, st.alg, st.p)
			for range 1 + rng.IntN(3) {
				v := l
				if rng.IntN(3) == 0 {
					v = limit(rng, st.alg, st.p) // the count changed under the state
				}
				m := 1 + rng.IntN(4)
				if rng.IntN(3) == 0 {
					m = 2 + rng.IntN(63)
				}
				m = min(m, 64-len(reqs))
				if m <= 0 {
					break
				}
				r := redlimit.Request{Key: st.key, Limit: v, Cost: cost(rng, v, m)}
				pk := rng.IntN(5) == 0
				for range m {
					reqs, peek = append(reqs, r), append(peek, pk)
				}
				if m > 1 {
					runs++
				}
			}
		}
		var desc strings.Builder
		fmt.Fprintf(&desc, "round %d at %d µs (step %d):", round, clock.Now().UnixMicro(), step)
		for i, r := range reqs {
			fmt.Fprintf(&desc, "\n  %d: %s %s cost %d peek %v", i, r.Key, r.Limit, r.Cost, peek[i])
		}
		history = append(history, desc.String())

		began := time.Now()
		got, err := batched.DecideBatch(ctx, reqs, peek)
		if err != nil {
			fatalf("round %d: batch: %v", round, err)
		}
		for i, r := range reqs {
			want, inMem, err := oneByOne(ctx, alone, mem, r, peek[i])
			if err != nil {
				fatalf("round %d, decision %d: %v", round, i, err)
			}
			if got[i] != want || got[i] != inMem {
				fatalf("round %d, decision %d of %d (%s %s cost %d, peek %v):\nbatch       %+v\none by one  %+v\nmemory      %+v", round, i, len(reqs), r.Key, r.Limit, r.Cost, peek[i], got[i], want, inMem)
			}
			decisions++
			if got[i].Allowed {
				allowed++
			}
		}
		// A key's TTL was set by the round that wrote it last, the batch's
		// first, then the calls one by one; Redis's clock is the wall
		// clock, and a busy machine stretches it by a few ms now and then
		// (a seed's rounds, run again, have the TTLs within a ms).
		took = max(took, time.Since(began).Milliseconds())
		for _, st := range sts {
			l := redlimit.Limit{Algorithm: st.alg, Period: st.p, Count: 1, Burst: 1}
			ks := dumpKeys(t, srv, batched.KeyOf(st.key, l), alone.KeyOf(st.key, l))
			b, a := ks[0], ks[1]
			if b.typ != a.typ || b.value != a.value || b.pttl > a.pttl+10 || a.pttl > b.pttl+took+10 {
				fatalf("round %d: state %s %s %s after the batch (rounds took up to %d ms):\nbatch       %+v\none by one  %+v", round, st.key, st.alg, st.p, took, b, a)
			}
		}
	}
	t.Logf("%d decisions, %d allowed, %d runs of identical decisions", decisions, allowed, runs)
}
