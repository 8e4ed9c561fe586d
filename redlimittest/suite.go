package redlimittest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
)

// NewStore makes a store for one subtest of [Run]; the store must read the
// time from now.
type NewStore func(t *testing.T, now func() time.Time) redlimit.Limiter

// T0 is the instant the suite's steps are measured from. It starts a minute
// (so a second and a millisecond) in Unix time, so every window of the
// suite's limits starts at T0.
var T0 = time.Unix(1_699_999_980, 0).UTC()

type op int

const (
	allow op = iota
	peek
	reset
	debit // AllowAll of one request with Debit set
)

func (o op) String() string { return [...]string{"allow", "peek", "reset", "debit"}[o] }

// step is one call at T0+at, and the result it must give.
type step struct {
	at    time.Duration
	op    op
	key   string
	limit redlimit.Limit
	cost  int64
	want  redlimit.Result
}

const ms = time.Millisecond

func ok(remaining int64, resetAfter time.Duration) redlimit.Result {
	return redlimit.Result{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func deny(remaining int64, retryAfter, resetAfter time.Duration) redlimit.Result {
	return redlimit.Result{Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

var (
	fixed3   = redlimit.PerSecond(3).FixedWindow()
	log3     = redlimit.PerSecond(3).SlidingLog()
	sliding  = redlimit.PerSecond(10).SlidingWindow()
	bucket   = redlimit.PerSecond(10).TokenBucket(3)
	bucket3  = redlimit.PerSecond(3).TokenBucket(1) // emission interval 333,334 µs
	perMin   = redlimit.PerMinute(5).FixedWindow()
	longLog  = redlimit.Per(2, time.Hour).SlidingLog()
	shortLog = redlimit.Per(1, 250*time.Millisecond).SlidingLog()
)

// scenario is a run of steps, in order, on a fresh store.
type scenario struct {
	name  string
	steps []step
}

// scenarios are the steps, by name. Within a scenario the steps run in order.
var scenarios = []scenario{
	{"fixed_window", []step{
		{0, allow, "a", fixed3, 1, ok(2, 1000*ms)},
		{100 * ms, allow, "a", fixed3, 2, ok(0, 900*ms)},
		{200 * ms, allow, "a", fixed3, 1, deny(0, 800*ms, 800*ms)},
		{300 * ms, peek, "a", fixed3, 1, deny(0, 700*ms, 700*ms)},
		{300 * ms, allow, "a", fixed3, 4, deny(0, redlimit.Never, 700*ms)},
		{300 * ms, peek, "b", fixed3, 3, ok(0, 700*ms)},
		{999 * ms, allow, "a", fixed3, 1, deny(0, 1*ms, 1*ms)},
		{1000 * ms, allow, "a", fixed3, 3, ok(0, 1000*ms)},
		{1200 * ms, reset, "a", fixed3, 1, redlimit.Result{}},
		{1200 * ms, allow, "a", fixed3, 1, ok(2, 800*ms)},
		{1200 * ms, peek, "a", fixed3, 2, ok(0, 800*ms)},
		{1200 * ms, allow, "a", perMin, 5, ok(0, 58800*ms)},
		{1300 * ms, allow, "a", perMin, 1, deny(0, 58700*ms, 58700*ms)},
	}},
	{"sliding_log", []step{
		{0, allow, "a", log3, 1, ok(2, 1000*ms)},
		{100 * ms, allow, "a", log3, 1, ok(1, 1000*ms)},
		{100 * ms, allow, "a", log3, 1, ok(0, 1000*ms)}, // same instant: both count
		{500 * ms, allow, "a", log3, 1, deny(0, 500*ms, 600*ms)},
		{500 * ms, allow, "a", log3, 2, deny(0, 600*ms, 600*ms)},
		{500 * ms, allow, "a", log3, 4, deny(0, redlimit.Never, 600*ms)},
		{1000 * ms, allow, "a", log3, 1, ok(0, 1000*ms)}, // the entry at 0 has expired
		{1000 * ms, peek, "a", log3, 1, deny(0, 100*ms, 1000*ms)},
		{1100 * ms, allow, "a", log3, 2, ok(0, 1000*ms)},
		{1100 * ms, peek, "b", log3, 3, ok(0, 1000*ms)},
		{2100 * ms, peek, "a", log3, 1, ok(2, 1000*ms)},
		{2100 * ms, reset, "a", log3, 1, redlimit.Result{}},
		{2100 * ms, allow, "a", log3, 3, ok(0, 1000*ms)},
		{0, allow, "h", longLog, 2, ok(0, time.Hour)},
		{time.Hour - 1*ms, allow, "h", longLog, 1, deny(0, 1*ms, 1*ms)},
		{time.Hour, allow, "h", longLog, 1, ok(1, time.Hour)},
		{0, allow, "t", shortLog, 1, ok(0, 250*ms)},
		{0, allow, "t", shortLog, 1, deny(0, 250*ms, 250*ms)},
		{250 * ms, allow, "t", shortLog, 1, ok(0, 250*ms)},
	}},
	{"sliding_window", []step{
		{0, allow, "a", sliding, 4, ok(6, 2000*ms)},
		{500 * ms, allow, "a", sliding, 6, ok(0, 1500*ms)},
		// This window is full: wait until the next one has faded it to 9.
		{600 * ms, allow, "a", sliding, 1, deny(0, 500*ms, 1400*ms)},
		{1100 * ms, allow, "a", sliding, 1, ok(0, 1900*ms)}, // 10*0.9 + 0 = 9
		{1200 * ms, allow, "a", sliding, 1, ok(0, 1800*ms)}, // 10*0.8 + 1 = 9
		// 10*0.75 + 2 = 9.5: the previous window must fade to 7 (at 1.3 s).
		{1250 * ms, allow, "a", sliding, 1, deny(0, 50*ms, 1750*ms)},
		{1250 * ms, peek, "a", sliding, 11, deny(0, redlimit.Never, 1750*ms)},
		{1300 * ms, allow, "a", sliding, 1, ok(0, 1700*ms)},
		{2500 * ms, peek, "a", sliding, 1, ok(7, 1500*ms)}, // 3*0.5 = 1.5: 8.5 left, less 1
		{3500 * ms, allow, "a", sliding, 10, ok(0, 1500*ms)},
		{3500 * ms, reset, "a", sliding, 1, redlimit.Result{}},
		{3500 * ms, peek, "a", sliding, 10, ok(0, 1500*ms)},
		{3500 * ms, peek, "b", sliding, 1, ok(9, 1500*ms)},
	}},
	{"token_bucket", []step{
		{0, allow, "a", bucket, 1, ok(2, 100*ms)},
		{0, allow, "a", bucket, 2, ok(0, 300*ms)},
		{0, allow, "a", bucket, 1, deny(0, 100*ms, 300*ms)},
		{50 * ms, allow, "a", bucket, 1, deny(0, 50*ms, 250*ms)},
		{100 * ms, allow, "a", bucket, 1, ok(0, 300*ms)},
		{100 * ms, allow, "a", bucket, 4, deny(0, redlimit.Never, 300*ms)},
		{100 * ms, peek, "a", bucket, 3, deny(0, 300*ms, 300*ms)},
		{1000 * ms, peek, "a", bucket, 3, ok(0, 300*ms)},
		{1000 * ms, peek, "a", bucket, 1, ok(2, 100*ms)},
		{1000 * ms, allow, "a", bucket, 3, ok(0, 300*ms)},
		{1000 * ms, reset, "a", bucket, 1, redlimit.Result{}},
		{1000 * ms, allow, "a", bucket, 1, ok(2, 100*ms)},
		// Rates that do not divide the period round the interval up to a µs.
		{0, allow, "c", bucket3, 1, ok(0, 333334*time.Microsecond)},
		{333333 * time.Microsecond, allow, "c", bucket3, 1, deny(0, time.Microsecond, time.Microsecond)},
		{333334 * time.Microsecond, allow, "c", bucket3, 1, ok(0, 333334*time.Microsecond)},
	}},
	{"keys_are_separate", []step{
		{0, allow, "a", fixed3, 3, ok(0, 1000*ms)},
		{0, allow, "a:", fixed3, 1, ok(2, 1000*ms)},
		{0, allow, "{a}", fixed3, 1, ok(2, 1000*ms)},
		{0, allow, "a\n", fixed3, 1, ok(2, 1000*ms)},
		{0, allow, "%7Ba%7D", fixed3, 1, ok(2, 1000*ms)},
		{0, allow, "a", fixed3.SlidingLog(), 1, ok(2, 1000*ms)},                          // another algorithm
		{0, allow, "a", redlimit.Per(3, 2*time.Second).FixedWindow(), 1, ok(2, 2000*ms)}, // another period
		{0, allow, "a", redlimit.PerSecond(5).FixedWindow(), 1, ok(1, 1000*ms)},          // same state, new count
	}},
}

// Run runs the conformance suite against the stores newStore makes.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Steps", func(t *testing.T) { runSteps(t, newStore) })
	t.Run("AllowAll", func(t *testing.T) { runAllowAll(t, newStore) })
	t.Run("BadInput", func(t *testing.T) { runBadInput(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { runConcurrent(t, newStore) })
	t.Run("Debits", func(t *testing.T) { runDebits(t, newStore) })
	t.Run("ClockOutOfRange", func(t *testing.T) { runClockOutOfRange(t, newStore) })
	t.Run("GrantOwnsRequests", func(t *testing.T) { runGrantOwnsRequests(t, newStore) })
}

// uniq returns a suffix that keeps one run's keys apart from another's.
func uniq() string { return fmt.Sprintf("/%016x", rand.Uint64()) }

func runSteps(t *testing.T, newStore NewStore) {
	runScenarios(t, newStore, scenarios)
}

func runScenarios(t *testing.T, newStore NewStore, scenarios []scenario) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock(T0)
			s := newStore(t, clock.Now)
			ctx := context.Background()
			suffix := uniq()
			for i, st := range sc.steps {
				clock.Set(T0.Add(st.at))
				key := st.key + suffix
				var got redlimit.Result
				var err error
				switch st.op {
				case allow:
					got, err = s.AllowN(ctx, key, st.limit, st.cost)
				case peek:
					got, err = s.Peek(ctx, key, st.limit, st.cost)
				case reset:
					err = s.Reset(ctx, key, st.limit)
				case debit:
					var d redlimit.Decision
					d, err = s.AllowAll(ctx, []redlimit.Request{{Key: key, Limit: st.limit, Cost: st.cost, Debit: true}})
					if err == nil {
						got = d.Results[0]
						if d.Allowed != got.Allowed {
							t.Errorf("step %d: decision Allowed %v, its one result %v", i, d.Allowed, got.Allowed)
						}
					}
				}
				if err != nil {
					t.Fatalf("step %d: %s(%q, %s, %d) at T0+%s: %v", i, st.op, st.key, st.limit, st.cost, st.at, err)
				}
				want := st.want
				if st.op != reset {
					want.Max = st.limit.Max()
				}
				if got != want {
					t.Errorf("step %d: %s(%q, %s, %d) at T0+%s\n got %+v\nwant %+v", i, st.op, st.key, st.limit, st.cost, st.at, got, want)
				}
			}
		})
	}
}

func runAllowAll(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	s := newStore(t, clock.Now)
	ctx := context.Background()
	sfx := uniq()
	perSecond := redlimit.PerSecond(2).SlidingLog()
	perMinute := redlimit.PerMinute(5).FixedWindow()
	route := redlimit.PerSecond(3).TokenBucket(3)
	reqs := []redlimit.Request{
		{Key: "user" + sfx, Limit: perSecond, Cost: 1},
		{Key: "user" + sfx, Limit: perMinute, Cost: 1},
		{Key: "route" + sfx, Limit: route, Cost: 1},
	}
	type want struct {
		allowed bool
		rem     [3]int64
	}
	for i, w := range []want{
		{true, [3]int64{1, 4, 2}},
		{true, [3]int64{0, 3, 1}},
		{false, [3]int64{0, 2, 0}}, // denied by perSecond; the others as Peek would say
		{false, [3]int64{0, 2, 0}}, // and nothing was consumed
	} {
		d, err := s.AllowAll(ctx, reqs)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		var rem [3]int64
		for j, r := range d.Results {
			rem[j] = r.Remaining
		}
		if d.Allowed != w.allowed || rem != w.rem || len(d.Results) != 3 {
			t.Fatalf("call %d: allowed %v remaining %v, want %v %v", i, d.Allowed, rem, w.allowed, w.rem)
		}
		if !d.Allowed {
			if d.Results[0].Allowed || !d.Results[1].Allowed || !d.Results[2].Allowed {
				t.Errorf("call %d: per-limit verdicts %+v", i, d.Results)
			}
			if d.RetryAfter() != time.Second || d.Tightest() != 0 {
				t.Errorf("call %d: RetryAfter %s Tightest %d, want 1s 0", i, d.RetryAfter(), d.Tightest())
			}
		}
	}
	// The denials consumed nothing: the minute limit still has 3.
	r, err := s.Peek(ctx, "user"+sfx, perMinute, 3)
	if err != nil || !r.Allowed || r.Remaining != 0 {
		t.Errorf("Peek minute limit after denials: %+v, %v; want 3 left", r, err)
	}
	// A second later the per-second limit admits again, but the route bucket
	// has refilled 3 tokens only: a cost of 4 there denies the whole request.
	clock.Set(T0.Add(time.Second))
	big := []redlimit.Request{reqs[0], reqs[1], {Key: "route" + sfx, Limit: route, Cost: 4}}
	d, err := s.AllowAll(ctx, big)
	if err != nil || d.Allowed || d.Results[2].RetryAfter != redlimit.Never {
		t.Fatalf("cost above burst: %+v, %v", d, err)
	}
	d, err = s.AllowAll(ctx, reqs)
	if err != nil || !d.Allowed || d.Results[0].Remaining != 1 || d.Results[1].Remaining != 2 || d.Results[2].Remaining != 2 {
		t.Fatalf("after a second: %+v, %v", d, err)
	}
}

// badInputs are requests every store must refuse, with the sentinel they wrap.
var badInputs = []struct {
	name  string
	key   string
	limit redlimit.Limit
	cost  int64
	want  error
}{
	{"empty key", "", fixed3, 1, redlimit.ErrInvalidKey},
	{"zero cost", "k", fixed3, 0, redlimit.ErrInvalidCost},
	{"negative cost", "k", fixed3, -1, redlimit.ErrInvalidCost},
	{"huge cost", "k", fixed3, redlimit.MaxCost + 1, redlimit.ErrInvalidCost},
	{"zero count", "k", redlimit.PerSecond(0), 1, redlimit.ErrInvalidLimit},
	{"negative count", "k", redlimit.PerSecond(-5), 1, redlimit.ErrInvalidLimit},
	{"zero period", "k", redlimit.Per(1, 0), 1, redlimit.ErrInvalidLimit},
	{"negative period", "k", redlimit.Per(1, -time.Second), 1, redlimit.ErrInvalidLimit},
	{"sub-millisecond period", "k", redlimit.Per(1, time.Microsecond), 1, redlimit.ErrInvalidLimit},
	{"fractional microseconds", "k", redlimit.Per(1, time.Second+1), 1, redlimit.ErrInvalidLimit},
	{"unknown algorithm", "k", redlimit.Limit{Algorithm: 9, Count: 1, Period: time.Second}, 1, redlimit.ErrUnknownAlgorithm},
	{"zero algorithm", "k", redlimit.Limit{Count: 1, Period: time.Second}, 1, redlimit.ErrUnknownAlgorithm},
	{"zero burst", "k", redlimit.PerSecond(1).TokenBucket(0), 1, redlimit.ErrInvalidBurst},
	{"negative burst", "k", redlimit.PerSecond(1).TokenBucket(-1), 1, redlimit.ErrInvalidBurst},
	{"burst too long", "k", redlimit.Per(1, redlimit.MaxPeriod).TokenBucket(redlimit.MaxCount), 1, redlimit.ErrInvalidBurst},
	{"sliding log too long", "k", redlimit.PerHour(redlimit.MaxLogCount + 1).SlidingLog(), 1, redlimit.ErrInvalidLimit},
}

func runBadInput(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	s := newStore(t, clock.Now)
	ctx := context.Background()
	for _, bad := range badInputs {
		if _, err := s.AllowN(ctx, bad.key, bad.limit, bad.cost); !errors.Is(err, bad.want) {
			t.Errorf("AllowN %s: err %v, want %v", bad.name, err, bad.want)
		}
		if _, err := s.Peek(ctx, bad.key, bad.limit, bad.cost); !errors.Is(err, bad.want) {
			t.Errorf("Peek %s: err %v, want %v", bad.name, err, bad.want)
		}
		if _, err := s.AllowAll(ctx, []redlimit.Request{{Key: "fine" + uniq(), Limit: fixed3, Cost: 1}, {Key: bad.key, Limit: bad.limit, Cost: bad.cost}}); !errors.Is(err, bad.want) {
			t.Errorf("AllowAll %s: err %v, want %v", bad.name, err, bad.want)
		}
		if bad.want != redlimit.ErrInvalidCost {
			if err := s.Reset(ctx, bad.key, bad.limit); !errors.Is(err, bad.want) {
				t.Errorf("Reset %s: err %v, want %v", bad.name, err, bad.want)
			}
		}
	}
	k := "dup" + uniq()
	if _, err := s.AllowAll(ctx, []redlimit.Request{{Key: k, Limit: fixed3, Cost: 1}, {Key: k, Limit: redlimit.PerSecond(9).FixedWindow(), Cost: 1}}); !errors.Is(err, redlimit.ErrDuplicateLimit) {
		t.Errorf("AllowAll with a duplicate limit: err %v", err)
	}
	if _, err := s.AllowAll(ctx, nil); !errors.Is(err, redlimit.ErrNoRequests) {
		t.Errorf("AllowAll with no requests: err %v", err)
	}
	// One more request than a decision may carry, each valid and distinct:
	// refused whole, and the first not consumed.
	many := make([]redlimit.Request, redlimit.MaxRequests+1)
	for i := range many {
		many[i] = redlimit.Request{Key: fmt.Sprint(k, "-", i), Limit: fixed3, Cost: 3}
	}
	many[0].Key = k
	if _, err := s.AllowAll(ctx, many); !errors.Is(err, redlimit.ErrInvalidLimit) {
		t.Errorf("AllowAll of %d requests: err %v, want ErrInvalidLimit", len(many), err)
	}
	if d, err := s.AllowAll(ctx, many[1:]); err != nil || !d.Allowed {
		t.Errorf("AllowAll of %d requests: %v, %v", redlimit.MaxRequests, d.Allowed, err)
	}
	// The first request of the refused calls above was not consumed.
	if r, err := s.Peek(ctx, k, fixed3, 3); err != nil || !r.Allowed {
		t.Errorf("a refused AllowAll consumed its valid request: %+v, %v", r, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.AllowN(cctx, "k"+uniq(), fixed3, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("AllowN with a canceled context: err %v, want context.Canceled", err)
	}
}

// runConcurrent checks that 64 goroutines on one key admit exactly the
// limit, for every exact algorithm.
func runConcurrent(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	s := newStore(t, clock.Now)
	for _, l := range []redlimit.Limit{
		redlimit.PerHour(100).FixedWindow(),
		redlimit.PerHour(100).SlidingLog(),
		redlimit.PerHour(100).SlidingWindow(),
		redlimit.PerHour(1).TokenBucket(100),
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			key := "hot" + uniq()
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for range 5 {
						r, err := s.AllowN(context.Background(), key, l, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); got != 100 {
				t.Errorf("admitted %d of 320, want exactly 100", got)
			}
		})
	}
}

// runClockOutOfRange drives a store's clock outside the times it computes
// exactly: the Unix epoch to 2^52 µs. It goes before the epoch, past 2^52
// and 2^53 µs, and to the largest time.Time a Unix microsecond count
// holds. Such a time reads as the nearest bound, where time stands still.
// No limit admits more than its count, and nothing errs or panics.
func runClockOutOfRange(t *testing.T, newStore NewStore) {
	limits := []redlimit.Limit{
		redlimit.PerHour(3).FixedWindow(),
		redlimit.PerHour(3).SlidingWindow(),
		redlimit.PerHour(3).SlidingLog(),
		redlimit.PerHour(3).TokenBucket(3),
	}
	instants := []struct {
		name string
		at   time.Time
	}{
		{"before the epoch", time.Unix(-1_000_000, 0)},
		{"at 2^52 µs", time.UnixMicro(1 << 52)},
		{"past 2^52 µs", time.UnixMicro(1<<52 + 123_456_789)},
		{"past 2^53 µs", time.UnixMicro(1<<53 + 1)},
		{"the largest Unix µs", time.UnixMicro(1<<63 - 1)},
	}
	for _, in := range instants {
		t.Run(in.name, func(t *testing.T) {
			clock := NewClock(in.at)
			s := newStore(t, clock.Now)
			ctx := context.Background()
			for _, l := range limits {
				key := "clock" + uniq()
				admitted := 0
				for i := range 8 {
					// Steps of a millisecond: nothing of an hour's
					// limit may come back, in range or out of it.
					clock.Set(in.at.Add(time.Duration(i) * time.Millisecond))
					r, err := s.AllowN(ctx, key, l, 1)
					if err != nil {
						t.Fatalf("%s, decision %d: %v", l, i, err)
					}
					if r.Allowed {
						admitted++
					}
					if r.Remaining < 0 || r.Remaining > l.Max() || r.RetryAfter < 0 || r.ResetAfter < 0 {
						t.Errorf("%s, decision %d: %+v", l, i, r)
					}
				}
				if admitted != 3 {
					t.Errorf("%s: %d of 8 admitted, want 3", l, admitted)
				}
			}
		})
	}
}
