package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// MaxArrivals is the most requests one pattern may hold. Each arrival
// takes eight bytes, plus one per algorithm.
const MaxArrivals = 20_000_000

// A Pattern is a sequence of request arrivals: the traffic a simulation
// replays. Build one with [Steady], [Bursts], [Straddle], [Poisson] or
// [ParseCSV], or fill in the fields directly.
type Pattern struct {
	// Name describes the pattern in reports and charts, such as
	// "steady 2/s for 10m0s".
	Name string
	// Start is the instant of offset 0. The zero value lets [Run] choose
	// an instant at which a fixed window begins. So offsets are positions
	// within the limit's windows. Offset 0 starts a window; offset Period
	// starts the next.
	Start time.Time
	// Duration is how long the pattern lasts; reports and charts span it.
	// Every offset must be below it. Zero means until the last arrival.
	Duration time.Duration
	// Offsets are the arrival times of the requests, one per request of cost
	// 1, from Start, in non-decreasing order. Requests may share an instant.
	// Simulations work in whole microseconds, as the stores do, so any finer
	// part is dropped.
	Offsets []time.Duration
}

// span returns the pattern's length in whole microseconds: Duration, or just
// past the last arrival.
func (p *Pattern) span() int64 {
	if p.Duration > 0 {
		return p.Duration.Microseconds()
	}
	if n := len(p.Offsets); n > 0 {
		return p.Offsets[n-1].Microseconds() + 1
	}
	return 0
}

// validate checks what Run relies on.
func (p *Pattern) validate() error {
	if len(p.Offsets) == 0 {
		return fmt.Errorf("%w: no requests", ErrInvalidPattern)
	}
	if len(p.Offsets) > MaxArrivals {
		return fmt.Errorf("%w: %d requests, more than %d", ErrInvalidPattern, len(p.Offsets), MaxArrivals)
	}
	if p.Duration < 0 {
		return fmt.Errorf("%w: negative duration %s", ErrInvalidPattern, p.Duration)
	}
	prev := time.Duration(0)
	for i, off := range p.Offsets {
		switch {
		case off < 0:
			return fmt.Errorf("%w: offset %d is negative (%s)", ErrInvalidPattern, i, off)
		case off < prev:
			return fmt.Errorf("%w: offset %d (%s) is before offset %d (%s): offsets must not decrease", ErrInvalidPattern, i, off, i-1, prev)
		case p.Duration > 0 && off >= p.Duration:
			return fmt.Errorf("%w: offset %d (%s) is not before the duration %s", ErrInvalidPattern, i, off, p.Duration)
		}
		prev = off
	}
	return nil
}

// checkRate reports whether rate is a usable number of requests per second.
func checkRate(rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("%w: rate %g is not a positive number of requests per second", ErrInvalidPattern, rate)
	}
	return nil
}

func checkDuration(d time.Duration) error {
	if d < time.Microsecond {
		return fmt.Errorf("%w: duration %s is below 1µs", ErrInvalidPattern, d)
	}
	return nil
}

// checkCount reports whether a pattern of about n requests may be made.
func checkCount(n float64) error {
	if n > MaxArrivals {
		return fmt.Errorf("%w: about %.0f requests, more than %d", ErrInvalidPattern, n, MaxArrivals)
	}
	return nil
}

// Steady returns rate requests per second, evenly spaced, for d: one at
// offset 0, then one every 1/rate seconds (rounded to the microsecond).
func Steady(rate float64, d time.Duration) (Pattern, error) {
	if err := checkRate(rate); err != nil {
		return Pattern{}, err
	}
	if err := checkDuration(d); err != nil {
		return Pattern{}, err
	}
	if err := checkCount(rate * d.Seconds()); err != nil {
		return Pattern{}, err
	}
	offs := make([]time.Duration, 0, int(math.Ceil(rate*d.Seconds())))
	for k := 0; ; k++ {
		off := time.Duration(math.Round(float64(k)*1e6/rate)) * time.Microsecond
		if off >= d {
			break
		}
		offs = append(offs, off)
	}
	return Pattern{Name: fmt.Sprintf("steady %g/s for %s", rate, shortDuration(d)), Duration: d, Offsets: offs}, nil
}

// Bursts returns bursts of size requests, all at one instant, at offsets 0,
// every, 2*every and so on while before d.
func Bursts(size int, every, d time.Duration) (Pattern, error) {
	if size < 1 {
		return Pattern{}, fmt.Errorf("%w: burst size %d is below 1", ErrInvalidPattern, size)
	}
	if every < time.Microsecond {
		return Pattern{}, fmt.Errorf("%w: burst interval %s is below 1µs", ErrInvalidPattern, every)
	}
	if err := checkDuration(d); err != nil {
		return Pattern{}, err
	}
	bursts := (d + every - 1) / every
	if err := checkCount(float64(bursts) * float64(size)); err != nil {
		return Pattern{}, err
	}
	offs := make([]time.Duration, 0, int(bursts)*size)
	for t := time.Duration(0); t < d; t += every {
		for range size {
			offs = append(offs, t)
		}
	}
	return Pattern{Name: fmt.Sprintf("bursts of %d every %s for %s", size, shortDuration(every), shortDuration(d)), Duration: d, Offsets: offs}, nil
}

// Straddle returns the fixed window's worst case for a limit of count per
// window. It spreads count requests evenly over the last tenth of one
// window, and count more over the first tenth of the next. The boundary
// is at offset window. The pattern lasts three windows, so the aftermath
// shows too. With a zero Start, [Run] puts offset 0 on a window boundary.
// So the fixed window admits all 2*count requests within a tenth of a
// window either side of the boundary.
func Straddle(count int64, window time.Duration) (Pattern, error) {
	if count < 1 || count > MaxArrivals/2 {
		return Pattern{}, fmt.Errorf("%w: straddle count %d is not in 1..%d", ErrInvalidPattern, count, MaxArrivals/2)
	}
	if window < 10*time.Microsecond {
		return Pattern{}, fmt.Errorf("%w: straddle window %s is below 10µs", ErrInvalidPattern, window)
	}
	w := window.Microseconds()
	tenth := w / 10
	offs := make([]time.Duration, 0, 2*count)
	for _, from := range []int64{w - tenth, w} {
		for k := range count {
			offs = append(offs, time.Duration(from+k*tenth/count)*time.Microsecond)
		}
	}
	return Pattern{
		Name:     fmt.Sprintf("straddle: %d before and %d after a %s boundary", count, count, shortDuration(window)),
		Duration: 3 * time.Duration(w) * time.Microsecond,
		Offsets:  offs,
	}, nil
}

// Poisson returns random arrivals at rate requests per second on average,
// for d: the gaps between requests are exponentially distributed, as from
// many independent clients. The same seed gives the same arrivals.
func Poisson(rate float64, d time.Duration, seed uint64) (Pattern, error) {
	if err := checkRate(rate); err != nil {
		return Pattern{}, err
	}
	if err := checkDuration(d); err != nil {
		return Pattern{}, err
	}
	mean := rate * d.Seconds()
	// Leave room for chance: six standard deviations above the mean.
	if err := checkCount(mean + 6*math.Sqrt(mean)); err != nil {
		return Pattern{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	end := float64(d.Microseconds())
	offs := make([]time.Duration, 0, int(mean+6*math.Sqrt(mean))+1)
	t := 0.0 // µs
	for {
		// Inverse transform: -ln(U)/rate with U in (0, 1].
		t += -math.Log(1-rng.Float64()) / rate * 1e6
		if t >= end {
			break
		}
		if len(offs) == MaxArrivals {
			return Pattern{}, checkCount(MaxArrivals + 1)
		}
		offs = append(offs, time.Duration(t)*time.Microsecond)
	}
	return Pattern{Name: fmt.Sprintf("poisson %g/s for %s (seed %d)", rate, shortDuration(d), seed), Duration: d, Offsets: offs}, nil
}
