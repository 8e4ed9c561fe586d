package loadgen

import (
	"fmt"
	"math/rand/v2"
)

// Distribution says how workers pick the key of each decision among
// [Options].Keys keys.
type Distribution uint8

const (
	// Uniform picks every key with the same probability.
	Uniform Distribution = iota
	// Zipf picks key i (from 0) with a probability proportional to
	// (1+i)^-s, where s is [Options].ZipfS: a few hot keys take most of the
	// traffic, as real clients often do.
	Zipf
)

var distributionNames = [...]string{"uniform", "zipf"}

// String returns the distribution's flag value: "uniform" or "zipf".
func (d Distribution) String() string {
	if int(d) < len(distributionNames) {
		return distributionNames[d]
	}
	return fmt.Sprintf("Distribution(%d)", uint8(d))
}

// ParseDistribution returns the distribution named s: "uniform" or "zipf".
func ParseDistribution(s string) (Distribution, error) {
	for i, name := range distributionNames {
		if name == s {
			return Distribution(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown key distribution %q (want uniform or zipf)", ErrInvalidOptions, s)
}

// MarshalText implements [encoding.TextMarshaler].
func (d Distribution) MarshalText() ([]byte, error) {
	if int(d) >= len(distributionNames) {
		return nil, fmt.Errorf("%w: unknown key distribution %d", ErrInvalidOptions, uint8(d))
	}
	return []byte(distributionNames[d]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (d *Distribution) UnmarshalText(b []byte) error {
	v, err := ParseDistribution(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// picker draws key indexes for one worker, from a source of its own, so
// workers never share (or lock) a random generator.
type picker struct {
	r *rand.Rand
	z *rand.Zipf // nil for Uniform
	n uint64
}

// newPicker returns a picker over n keys (n >= 1) seeded with (seed, stream).
// s must be above 1 for Zipf.
func newPicker(d Distribution, s float64, n int, seed, stream uint64) *picker {
	p := &picker{r: rand.New(rand.NewPCG(seed, stream)), n: uint64(n)}
	if d == Zipf && n > 1 {
		p.z = rand.NewZipf(p.r, s, 1, uint64(n-1))
	}
	return p
}

// next returns a key index in [0, n).
func (p *picker) next() int {
	switch {
	case p.n == 1:
		return 0
	case p.z != nil:
		return int(p.z.Uint64())
	}
	return int(p.r.Uint64N(p.n))
}
