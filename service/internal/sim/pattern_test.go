package sim

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestSteady(t *testing.T) {
	t.Parallel()
	p, err := Steady(4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(0, 250, 500, 750); !slices.Equal(p.Offsets, want) {
		t.Errorf("Steady(4, 1s) = %v, want %v", p.Offsets, want)
	}
	if p.Duration != time.Second || p.Name != "steady 4/s for 1s" {
		t.Errorf("Duration %s, Name %q", p.Duration, p.Name)
	}

	// Spacing rounds to the microsecond, without drift.
	p, err = Steady(3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, 333333 * time.Microsecond, 666667 * time.Microsecond}
	if !slices.Equal(p.Offsets, want) {
		t.Errorf("Steady(3, 1s) = %v, want %v", p.Offsets, want)
	}
}

func TestBursts(t *testing.T) {
	t.Parallel()
	p, err := Bursts(3, time.Second, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := ms(0, 0, 0, 1000, 1000, 1000, 2000, 2000, 2000); !slices.Equal(p.Offsets, want) {
		t.Errorf("Bursts(3, 1s, 2.5s) = %v, want %v", p.Offsets, want)
	}
}

func TestStraddle(t *testing.T) {
	t.Parallel()
	p, err := Straddle(5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The last tenth of window 0 and the first tenth of window 1, 20ms apart.
	if want := ms(900, 920, 940, 960, 980, 1000, 1020, 1040, 1060, 1080); !slices.Equal(p.Offsets, want) {
		t.Errorf("Straddle(5, 1s) = %v, want %v", p.Offsets, want)
	}
	if p.Duration != 3*time.Second || !p.Start.IsZero() {
		t.Errorf("Duration %s, Start %s; want 3s and zero", p.Duration, p.Start)
	}
}

func TestPoisson(t *testing.T) {
	t.Parallel()
	const rate, d = 50.0, time.Hour
	a, err := Poisson(rate, d, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Poisson(rate, d, 7)
	c, _ := Poisson(rate, d, 8)
	if !slices.Equal(a.Offsets, b.Offsets) {
		t.Error("the same seed gave different arrivals")
	}
	if slices.Equal(a.Offsets, c.Offsets) {
		t.Error("different seeds gave the same arrivals")
	}
	if err := a.validate(); err != nil {
		t.Error(err)
	}
	// The count is Poisson(rate*d): within five standard deviations.
	mean := rate * d.Seconds()
	if n := float64(len(a.Offsets)); math.Abs(n-mean) > 5*math.Sqrt(mean) {
		t.Errorf("%v arrivals, want about %v", n, mean)
	}
}

func TestPatternErrors(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func() (Pattern, error){
		"steady rate 0":       func() (Pattern, error) { return Steady(0, time.Second) },
		"steady rate NaN":     func() (Pattern, error) { return Steady(math.NaN(), time.Second) },
		"steady rate Inf":     func() (Pattern, error) { return Steady(math.Inf(1), time.Second) },
		"steady duration 0":   func() (Pattern, error) { return Steady(1, 0) },
		"steady too many":     func() (Pattern, error) { return Steady(1e6, time.Hour) },
		"bursts size 0":       func() (Pattern, error) { return Bursts(0, time.Second, time.Minute) },
		"bursts every 0":      func() (Pattern, error) { return Bursts(1, 0, time.Minute) },
		"bursts too many":     func() (Pattern, error) { return Bursts(1000, time.Millisecond, time.Hour) },
		"straddle count 0":    func() (Pattern, error) { return Straddle(0, time.Minute) },
		"straddle window 1µs": func() (Pattern, error) { return Straddle(10, time.Microsecond) },
		"poisson rate -1":     func() (Pattern, error) { return Poisson(-1, time.Minute, 1) },
		"poisson too many":    func() (Pattern, error) { return Poisson(1e6, time.Hour, 1) },
	} {
		if _, err := f(); !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("%s: error %v, want ErrInvalidPattern", name, err)
		}
	}
}

func TestPatternValidate(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]Pattern{
		"empty":             {},
		"negative":          {Offsets: ms(-1, 0)},
		"decreasing":        {Offsets: ms(0, 5, 4)},
		"at the duration":   {Duration: time.Second, Offsets: ms(0, 1000)},
		"negative duration": {Duration: -time.Second, Offsets: ms(0)},
	} {
		if err := p.validate(); !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("%s: error %v, want ErrInvalidPattern", name, err)
		}
	}
	ok := Pattern{Duration: time.Second, Offsets: ms(0, 0, 999)}
	if err := ok.validate(); err != nil {
		t.Errorf("valid pattern: %v", err)
	}
}
