package model

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redlimittest"
)

// A sequence is decoded from a byte string. So the fuzzer's mutations of
// the bytes become other sequences. The seeded runs are random byte
// strings from fixed seeds. Each choice reads one byte, or eight for a
// number over a wide range. A string that runs out reads zeros, and the
// sequence ends with it. Choices are biased towards the edges where the
// arithmetic turns. Costs are 1, around the limit, at the limit, above
// it, or the largest. Periods and counts sit at their bounds. Time goes
// to a window's boundary, to a RetryAfter, or back.

// source reads choices from a byte string.
type source struct {
	b []byte
	i int
}

func (s *source) done() bool { return s.i >= len(s.b) }

func (s *source) byte() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

// intn returns a choice in [0, n), n >= 1.
func (s *source) intn(n int64) int64 {
	if n <= 256 {
		return int64(s.byte()) % n
	}
	return int64(s.u64() % uint64(n))
}

// between returns a choice in [lo, hi].
func (s *source) between(lo, hi int64) int64 { return lo + s.intn(hi-lo+1) }

func (s *source) u64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = s.byte()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// pick returns one of the values, or the result of other when the choice
// falls past them.
func pick(s *source, other func() int64, values ...int64) int64 {
	i := s.intn(int64(len(values)) + 1)
	if int(i) == len(values) {
		return other()
	}
	return values[i]
}

// Time bounds of a sequence: the stores document exact answers for times
// from the Unix epoch to 2^52 µs (in 2112), the bound a long run of large
// steps forward reaches.
var (
	minTime = redlimittest.T0.Add(-24 * time.Hour)
	maxTime = time.UnixMicro(1 << 52)
)

const maxPeriodMicros = int64(redlimit.MaxPeriod / time.Microsecond)

// calendarZones are the zones of generated calendar limits: UTC, DST
// changes both ways, a 30-minute DST change, a midnight that a DST
// change skips, and UTC by its name (one state with "").
var calendarZones = []string{"", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Antarctica/Troll", "UTC"}

// genLimit decodes a valid limit.
func genLimit(s *source) redlimit.Limit {
	alg := redlimit.FixedWindow + redlimit.Algorithm(s.intn(4))
	period := time.Duration(pick(s, func() int64 {
		if s.byte()%2 == 0 {
			return s.between(1000, 1_000_000) // 1 ms to 1 s
		}
		return s.between(1000, maxPeriodMicros)
	}, 1000, 1001, 3000, 10_000, 100_000, 1_000_000, 60_000_000, 3_600_000_000,
		86_400_000_000, 365*86_400_000_000, maxPeriodMicros-1, maxPeriodMicros)) * time.Microsecond
	l := redlimit.Limit{Algorithm: alg, Period: period}
	if alg == redlimit.FixedWindow && s.byte()%4 == 0 {
		unit := redlimit.Day + redlimit.CalendarUnit(s.intn(4))
		l = redlimit.PerCalendar(0, unit, calendarZones[s.intn(int64(len(calendarZones)))])
	}
	l.Count = genCount(s, alg)
	if alg == redlimit.TokenBucket {
		l.Burst = genBurst(s, l)
	}
	return l
}

// genCount decodes a count for alg.
func genCount(s *source, alg redlimit.Algorithm) int64 {
	top := int64(redlimit.MaxCount)
	if alg == redlimit.SlidingLog {
		top = redlimit.MaxLogCount
	}
	return pick(s, func() int64 {
		switch s.byte() % 3 {
		case 0:
			return s.between(1, 10)
		case 1:
			return s.between(1, min(1000, top))
		}
		return s.between(1, top)
	}, 1, 1, 2, 3, 5, 10, 100, 1000, top-1, top)
}

// genBurst decodes a burst for the token bucket l.
func genBurst(s *source, l redlimit.Limit) int64 {
	l.Burst = pick(s, func() int64 {
		if s.byte()%2 == 0 {
			return s.between(1, 10)
		}
		return s.between(1, redlimit.MaxCount)
	}, 1, 2, 3, l.Count, l.Count+1, 10, 1000, redlimit.MaxCount)
	return clampBurst(l)
}

// clampBurst returns l's burst within the bounds Validate sets: 1..MaxCount,
// and burst * emission interval at most 2^52 µs.
func clampBurst(l redlimit.Limit) int64 {
	b := min(max(l.Burst, 1), redlimit.MaxCount)
	if ei := l.EmissionInterval(); float64(b)*float64(ei) > 1<<52 {
		b = (1 << 52) / ei
	}
	return b
}

// hints are what the generator may aim at from the run so far.
type hints interface {
	// remaining returns the last Remaining answered for (key, limit), or -1.
	remaining(key int, l redlimit.Limit) int64
	// retryAfter and resetAfter return those of the last result that had one.
	retryAfter() time.Duration
	resetAfter() time.Duration
}

// generator turns a byte string into ops, one at a time.
type generator struct {
	s      *source
	limits []redlimit.Limit // the limits requests choose from
	keys   int
	start  time.Time
	at     time.Duration // the current instant, after start
	ops    int
	max    int
	// noBack keeps the clock from going back (Options.NoClockBack).
	noBack bool
	// noDebits keeps debits out (Options.NoDebits).
	noDebits bool
	// then is the debit that follows a check, at its instant.
	then *Op
	// was holds, by index, the limit each had before changeState.
	was map[int]redlimit.Limit
}

// newGenerator reads a sequence's header: its limits, keys and start.
func newGenerator(data []byte, maxOps int) *generator {
	s := &source{b: data}
	g := &generator{s: s, max: maxOps}
	for range 1 + s.intn(6) {
		g.limits = append(g.limits, genLimit(s))
	}
	g.keys = int(1 + s.intn(4))
	switch s.intn(4) {
	case 0:
		g.start = redlimittest.T0
	case 1:
		g.start = redlimittest.T0.Add(time.Microsecond)
	case 2:
		g.start = redlimittest.T0.Add(time.Duration(s.between(0, 86_400_000_000)) * time.Microsecond)
	default:
		g.start = redlimittest.T0.Add(time.Duration(s.between(0, 10*365*86_400_000_000)) * time.Microsecond)
	}
	return g
}

func (g *generator) now() time.Time { return g.start.Add(g.at) }

// moveTo sets the current instant to t, kept within [minTime, maxTime].
func (g *generator) moveTo(t time.Time) {
	if t.Before(minTime) {
		t = minTime
	}
	if t.After(maxTime) {
		t = maxTime
	}
	g.at = t.Sub(g.start)
}

func (g *generator) limit() (int, redlimit.Limit) {
	i := int(g.s.intn(int64(len(g.limits))))
	return i, g.limits[i]
}

func (g *generator) period() int64 {
	_, l := g.limit()
	return l.Period.Microseconds()
}

// cost decodes a cost for key under l.
func (g *generator) cost(h hints, key int, l redlimit.Limit) int64 {
	top := l.Max()
	c := pick(g.s, func() int64 {
		switch g.s.byte() % 4 {
		case 0:
			return g.s.between(1, 10)
		case 1:
			return g.s.between(1, top)
		case 2:
			if r := h.remaining(key, l); r >= 0 {
				return r + int64(g.s.byte()%3) // what is left, or just above it
			}
			return 1
		}
		return g.s.between(1, redlimit.MaxCost)
	}, 1, 1, 1, 1, 1, 2, 3, top-1, top, top, top+1, redlimit.MaxCost)
	return min(max(c, 1), redlimit.MaxCost)
}

// step moves the clock as the next choice says.
func (g *generator) step(h hints) {
	now := g.now()
	d := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	switch g.s.intn(16) {
	case 0, 1, 2, 3:
		return // same instant
	case 4:
		g.moveTo(now.Add(time.Microsecond))
	case 5, 6:
		g.moveTo(now.Add(d(g.s.between(0, max(1, g.period()/10)))))
	case 7:
		// To a window boundary of one of the limits (a calendar's: a
		// midnight, maybe a DST day's or a month's end), or just beside it.
		_, l := g.limit()
		W, us := l.Period.Microseconds(), now.UnixMicro()
		next := (floorDiv(us, W) + 1) * W
		if !l.Calendar.IsZero() {
			next = l.Calendar.WindowEnd(us)
		}
		g.moveTo(time.UnixMicro(next + g.s.between(-1, 1)))
	case 8:
		g.moveTo(now.Add(d(g.period() * g.s.between(1, 2) / g.s.between(1, 2))))
	case 9:
		if ra := h.retryAfter(); ra > 0 && ra != redlimit.Never {
			g.moveTo(now.Add(ra - d(g.s.between(0, 1))))
		}
	case 10:
		if ra := h.resetAfter(); ra > 0 {
			g.moveTo(now.Add(ra - d(g.s.between(0, 1))))
		}
	case 11:
		g.moveTo(now.Add(d(g.s.between(0, 86_400_000_000))))
	case 12:
		if g.s.byte()%4 == 0 {
			g.moveTo(now.Add(d(g.s.between(0, maxPeriodMicros))))
		}
	case 13:
		// Back, one time in two: by 1 µs, within a tenth of a period, or
		// within a period.
		b := g.s.byte()
		if g.noBack {
			return
		}
		switch b % 6 {
		case 0:
			g.moveTo(now.Add(-time.Microsecond))
		case 1:
			g.moveTo(now.Add(-d(g.s.between(1, max(1, g.period()/10)))))
		case 2:
			g.moveTo(now.Add(-d(g.s.between(1, g.period()))))
		}
	case 14:
		// A limit's count (or burst) changes; its algorithm and period stay.
		// A fixed window's may change its state instead (changeState).
		i, l := g.limit()
		if l.Algorithm == redlimit.FixedWindow && g.s.byte()%2 == 0 {
			g.changeState(i)
			return
		}
		top := int64(redlimit.MaxCount)
		if l.Algorithm == redlimit.SlidingLog {
			top = redlimit.MaxLogCount
		}
		switch g.s.byte() % 4 {
		case 0:
			l.Count = max(1, l.Count-1)
		case 1:
			l.Count = min(top, l.Count+1)
		case 2:
			l.Count = max(1, l.Count/2)
		default:
			l.Count = genCount(g.s, l.Algorithm)
		}
		if l.Algorithm == redlimit.TokenBucket {
			switch g.s.byte() % 4 {
			case 0:
				l.Burst = max(1, l.Burst-1)
			case 1:
				l.Burst = min(redlimit.MaxCount, l.Burst+1)
			case 2:
				l.Burst = genBurst(g.s, l)
			}
			l.Burst = clampBurst(l)
		}
		g.limits[i] = l
	case 15:
		g.moveTo(now.Add(d(g.s.between(0, 1000))))
	}
}

// changeState changes fixed window limit i to another state of the same
// key, as an operator's new rule does: back to the limit it had before;
// a calendar's unit or zone changed (Day to Month, Berlin to New York);
// a calendar limit made a plain window of the same period, or of a day;
// a plain window made a calendar limit. The count stays, or is halved.
// The old state stays in the stores, and a change back finds it.
func (g *generator) changeState(i int) {
	l := g.limits[i]
	if g.was == nil {
		g.was = map[int]redlimit.Limit{}
	}
	old, back := g.was[i]
	g.was[i] = l
	switch c := g.s.byte() % 4; {
	case c == 0 && back:
		g.limits[i] = old
		return
	case l.Calendar.IsZero():
		unit := redlimit.Day + redlimit.CalendarUnit(g.s.intn(4))
		l = redlimit.PerCalendar(l.Count, unit, calendarZones[g.s.intn(int64(len(calendarZones)))])
	case c == 1:
		l.Calendar = redlimit.Calendar{} // the same algorithm and period
	case c == 2:
		l = redlimit.Per(l.Count, 24*time.Hour).FixedWindow()
	default:
		unit := redlimit.Day + redlimit.CalendarUnit(g.s.intn(4))
		l = redlimit.PerCalendar(l.Count, unit, calendarZones[g.s.intn(int64(len(calendarZones)))])
	}
	if g.s.byte()%2 == 0 {
		l.Count = max(1, l.Count/2)
	}
	g.limits[i] = l
}

// hostSkew returns how far the hosts' clock is from the stores' at t
// (Env.HostClock): none one time in two; otherwise 1 µs, under 2 s, or
// under an hour, either way. Within an hour, every calendar window Go
// sends holds the stores' clock. It depends on t alone, so a replay
// skews alike, and an op that the generator moves to a calendar boundary
// often finds one between the clocks.
func hostSkew(t time.Time) time.Duration {
	h := uint64(t.UnixMicro()) * 0x9e3779b97f4a7c15 // Fibonacci hashing
	d := time.Duration(h>>20%3_600_000_000) * time.Microsecond
	switch h >> 62 {
	case 0, 1:
		return 0
	case 2:
		d = time.Microsecond
	}
	if h>>61&1 == 0 && d > time.Microsecond {
		d %= 2 * time.Second
	}
	if h>>60&1 == 0 {
		return -d
	}
	return d
}

// next returns the next op, or false when the bytes or the ops allowed have
// run out.
func (g *generator) next(h hints) (Op, bool) {
	if g.then != nil && g.ops < g.max {
		op := *g.then
		g.then, g.ops = nil, g.ops+1
		return op, true
	}
	if g.s.done() || g.ops >= g.max {
		return Op{}, false
	}
	g.ops++
	g.step(h)
	req := func() Req {
		k := int(g.s.intn(int64(g.keys)))
		_, l := g.limit()
		return Req{Key: k, Limit: l, Cost: g.cost(h, k, l)}
	}
	// A debit, one time in four where one may be: a one-request AllowAll
	// (as redlimit.Debit), or any request of an AllowAll.
	debit := func() bool { return !g.noDebits && g.s.intn(4) == 0 }
	op := Op{At: g.at}
	switch c := g.s.intn(32); {
	case c < 15:
		op.Kind, op.Reqs = Allow, []Req{req()}
		if debit() {
			op.Kind, op.Reqs[0].Debit = AllowAll, true
		}
	case c < 19:
		op.Kind, op.Reqs = Peek, []Req{req()}
		if debit() {
			// Envoy's check-then-debit flow: the cost of the work the
			// check let through, counted right after it.
			q := op.Reqs[0]
			q.Cost, q.Debit = g.cost(h, q.Key, q.Limit), true
			g.then = &Op{At: g.at, Kind: AllowAll, Reqs: []Req{q}}
			if g.s.intn(4) == 0 {
				// With other states' debits, which the check found no
				// room for: a full store may fail them all together.
				for range 1 + g.s.intn(3) {
					o := req()
					o.Debit = true
					g.then.Reqs = append(g.then.Reqs, o)
				}
			}
		}
	case c < 20:
		op.Kind, op.Reqs = Reset, []Req{req()}
		op.Reqs[0].Cost = 1
	case c >= 27 && c < 31:
		// A token bucket's turn, queued (its cost mostly within the
		// burst), sometimes given back at once, or later.
		op.Kind, op.Reqs = Queue, []Req{req()}
		q := &op.Reqs[0]
		for _, l := range g.limits {
			if q.Limit.Algorithm != redlimit.TokenBucket && l.Algorithm == redlimit.TokenBucket {
				q.Limit = l
			}
		}
		if q.Limit.Algorithm != redlimit.TokenBucket {
			op.Kind = Allow
			break
		}
		if g.s.intn(4) != 0 {
			q.Cost = 1 + g.s.intn(min(q.Limit.Burst, 3))
		}
		switch g.s.intn(4) {
		case 0:
			op.Kind = Unqueue
		case 1:
			g.then = &Op{At: g.at, Kind: Unqueue, Reqs: []Req{*q}}
		case 2:
			op.Kind = QueueLong
		}
	case c < 31:
		op.Kind = AllowAll
		for range 1 + g.s.intn(8) {
			r := req()
			r.Debit = debit()
			if !sharesState(op.Reqs, r) {
				op.Reqs = append(op.Reqs, r)
			}
		}
	default:
		op = g.bad(req())
	}
	return op, true
}

// sharesState reports whether r would share state with one of reqs.
func sharesState(reqs []Req, r Req) bool {
	for _, q := range reqs {
		if q.Key == r.Key && q.Limit.StateID("") == r.Limit.StateID("") {
			return true
		}
	}
	return false
}

// bad returns an op every store must refuse: a cost out of range, or an
// AllowAll whose requests share state.
func (g *generator) bad(r Req) Op {
	op := Op{At: g.at, Kind: Allow, Reqs: []Req{r}}
	switch g.s.intn(5) {
	case 0:
		op.Reqs[0].Cost = 0
	case 1:
		op.Reqs[0].Cost = redlimit.MaxCost + 1
	case 2:
		op.Kind = Peek
		op.Reqs[0].Cost = -1
	case 3:
		op.Kind = AllowAll
		op.Reqs[0].Cost = 0
	default:
		op.Kind = AllowAll
		dup := r
		dup.Limit.Count = max(1, dup.Limit.Count-1)
		op.Reqs = append(op.Reqs, dup)
	}
	return op
}

// Seeds returns n pseudo-random byte strings of about size bytes, the same
// for the same seed, to decode as sequences.
func Seeds(seed uint64, n, size int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c)) // "model"
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, size/2+rng.IntN(size))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = b
	}
	return out
}

// SeedsEnv names the environment variable that sets how many seeded
// sequences each fuzz target runs without -fuzz, in place of the count
// `make test` runs: REDLIMIT_MODEL_SEEDS=2000 go test -run FuzzModel ./memory/.
const SeedsEnv = "REDLIMIT_MODEL_SEEDS"

// SeedCount returns n, or the count SeedsEnv sets if it is a positive
// number.
func SeedCount(n int) int {
	if v, err := strconv.Atoi(os.Getenv(SeedsEnv)); err == nil && v > 0 {
		return v
	}
	return n
}
