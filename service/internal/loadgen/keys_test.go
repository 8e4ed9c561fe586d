package loadgen

import (
	"errors"
	"testing"
)

func TestPicker(t *testing.T) {
	t.Parallel()
	const n, draws = 100, 100_000
	for _, d := range []Distribution{Uniform, Zipf} {
		p := newPicker(d, 1.1, n, 1, 2)
		var counts [n]int
		for range draws {
			i := p.next()
			if i < 0 || i >= n {
				t.Fatalf("%s: key %d out of [0, %d)", d, i, n)
			}
			counts[i]++
		}
		for i, c := range counts {
			if c == 0 {
				t.Errorf("%s: key %d never drawn", d, i)
			}
		}
		// Zipf with s = 1.1 over 100 keys: P(0) = 1/sum(k^-1.1, k=1..100) ≈ 0.23, P(99) ≈ 0.0015.
		if d == Zipf && (counts[0] < draws/5 || counts[0] < 50*counts[n-1]) {
			t.Errorf("zipf: key 0 drawn %d times, key %d %d times: not skewed", counts[0], n-1, counts[n-1])
		}
		if d == Uniform && (counts[0] < draws/n/2 || counts[0] > 2*draws/n) {
			t.Errorf("uniform: key 0 drawn %d times, want about %d", counts[0], draws/n)
		}
	}
	// The same seed gives the same keys.
	a, b := newPicker(Zipf, 1.3, 50, 9, 3), newPicker(Zipf, 1.3, 50, 9, 3)
	for range 1000 {
		if x, y := a.next(), b.next(); x != y {
			t.Fatalf("same seed, keys %d and %d", x, y)
		}
	}
	for _, d := range []Distribution{Uniform, Zipf} {
		p := newPicker(d, 1.1, 1, 0, 0)
		for range 100 {
			if i := p.next(); i != 0 {
				t.Fatalf("%s over one key: %d", d, i)
			}
		}
	}
}

func TestDistributionText(t *testing.T) {
	t.Parallel()
	for _, d := range []Distribution{Uniform, Zipf} {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Distribution
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Errorf("%s: back %v, %v", d, back, err)
		}
	}
	if _, err := ParseDistribution("normal"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("ParseDistribution(normal): %v", err)
	}
	if _, err := Distribution(7).MarshalText(); err == nil {
		t.Error("Distribution(7).MarshalText: no error")
	}
	if s := Distribution(7).String(); s != "Distribution(7)" {
		t.Errorf("String %q", s)
	}
}
