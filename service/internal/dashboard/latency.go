package dashboard

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Backend latencies go into an HDR histogram per second, from 1 ns to
// latMax. One significant digit is enough to read a percentile.
// A longer sample counts as latMax.
const (
	latMax    = int64(60 * time.Second)
	latDigits = 1
)

func newLatHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, latMax, latDigits) }

// latRing holds one histogram per second of the last ringLen seconds. A
// second's histogram is made at its first sample. It is safe for
// concurrent use.
type latRing struct {
	mu   sync.Mutex
	secs [ringLen]latSecond
}

// latSecond is the histogram of second sec.
type latSecond struct {
	sec int64
	h   *hdrhistogram.Histogram
}

func (r *latRing) add(sec int64, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.secs[ringIndex(sec)]
	switch {
	case s.h == nil:
		s.h = newLatHist()
	case s.sec != sec:
		s.h.Reset() // a second ringLen or more ago
	}
	s.sec = sec
	s.h.RecordValue(min(int64(d), latMax))
}

// addInto adds second sec's histogram to h.
func (r *latRing) addInto(h *hdrhistogram.Histogram, sec int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := &r.secs[ringIndex(sec)]; s.h != nil && s.sec == sec {
		h.Merge(s.h)
	}
}
