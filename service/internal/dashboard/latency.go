package dashboard

import (
	"math/bits"
	"time"
)

// Backend latencies go into a log-linear histogram per second: four
// buckets per power of two from 128 ns up to about 34 s, so a percentile is
// read to within about 12%, and one bucket below 128 ns. The last bucket
// also takes anything longer.
const (
	latMinShift = 7  // the first power of two with its own buckets: 2^7 ns
	latOctaves  = 28 // 2^7 ns … 2^35 ns
	latSub      = 4  // buckets per power of two
	latBuckets  = 1 + latOctaves*latSub
)

// latBucket returns the bucket of d.
func latBucket(d time.Duration) int {
	if d < 1<<latMinShift {
		return 0
	}
	v := uint64(d)
	e := bits.Len64(v) - 1 // 2^e <= v < 2^(e+1)
	sub := int(v>>(e-2)) & (latSub - 1)
	return min(1+(e-latMinShift)*latSub+sub, latBuckets-1)
}

// latBounds returns the range [lo, hi) of bucket i.
func latBounds(i int) (lo, hi time.Duration) {
	if i == 0 {
		return 0, 1 << latMinShift
	}
	e := (i-1)/latSub + latMinShift
	sub := (i - 1) % latSub
	return time.Duration(4+sub) << (e - 2), time.Duration(5+sub) << (e - 2)
}

// latHist is one second's (or several seconds') histogram.
type latHist [latBuckets]uint64

func (h *latHist) count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// quantile returns the q-quantile (0 < q <= 1) of the histogram,
// interpolating linearly inside its bucket; 0 when it is empty.
func (h *latHist) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n) // the rank-th smallest sample, 1-based
	if rank < 1 {
		rank = 1
	}
	var seen float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := latBounds(i)
			frac := (rank - seen) / float64(c)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += float64(c)
	}
	_, hi := latBounds(latBuckets - 1)
	return hi
}

// latRing holds one histogram per second of the last ringLen seconds.
type latRing [ringLen][latBuckets]slot

func (r *latRing) add(sec int64, d time.Duration) {
	r[ringIndex(sec)][latBucket(d)].add(sec, 1)
}

// addInto adds second sec's histogram to h.
func (r *latRing) addInto(h *latHist, sec int64) {
	row := &r[ringIndex(sec)]
	for i := range row {
		h[i] += row[i].get(sec)
	}
}
