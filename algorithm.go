package redlimit

import "fmt"

// Algorithm selects how a [Limit] counts requests.
//
// The zero value is not a valid algorithm; [PerSecond] and its siblings
// choose [SlidingWindow].
type Algorithm uint8

const (
	// FixedWindow counts requests in windows aligned to the Unix epoch, or
	// to calendar periods in a time zone ([Limit.Calendar]).
	// O(1) memory; can admit up to twice the count across a window boundary.
	FixedWindow Algorithm = iota + 1
	// SlidingLog remembers the admitted cost of every instant over the last
	// period. Exact; memory per key grows with the number of instants at
	// which requests were admitted (at most the count), not with the cost.
	SlidingLog
	// SlidingWindow weights the previous fixed window's count by its overlap
	// with the sliding period. O(1) memory; exact while the previous window was
	// empty, approximate otherwise (see the package documentation).
	SlidingWindow
	// TokenBucket is GCRA: Count tokens per Period, at most Burst at once.
	// O(1) memory; exact. A token takes Period/Count rounded up to a whole
	// microsecond ([Limit.EmissionInterval]). So a bucket never refills
	// faster than its rate. Up to 10,000 tokens a second per key, it
	// refills at most one part in a hundred slower. Faster rates can
	// refill noticeably slower: 300,000 a second refills at 250,000.
	// Above 1,000,000 a second, a bucket refills at 1,000,000.
	TokenBucket
)

var algorithmNames = [...]string{
	FixedWindow:   "fixed_window",
	SlidingLog:    "sliding_log",
	SlidingWindow: "sliding_window",
	TokenBucket:   "token_bucket",
}

// String returns the algorithm's configuration name, such as "sliding_log".
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Valid reports whether a is one of the four algorithms.
func (a Algorithm) Valid() bool { return a >= FixedWindow && a <= TokenBucket }

// ParseAlgorithm returns the algorithm named s ("fixed_window", "sliding_log",
// "sliding_window" or "token_bucket").
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := FixedWindow; a <= TokenBucket; a++ {
		if algorithmNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownAlgorithm, s)
}

// MarshalText implements [encoding.TextMarshaler].
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownAlgorithm, uint8(a))
	}
	return []byte(algorithmNames[a]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
