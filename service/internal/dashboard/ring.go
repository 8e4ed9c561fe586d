package dashboard

import "sync/atomic"

// The per-second counters are rings of ringLen slots, one per second. The
// slot of second s is s mod ringLen. Each slot is one atomic word. It
// holds the second it counts in its high bits, and the count in its low
// bits. So a slot left over from a minute ago reads as zero. The first add
// of the new second resets it, without a lock and without a sweeper.

// ringLen is the length of every per-second ring, in seconds: the window
// the page charts (WindowSeconds), the second being counted, which must
// not share a slot with the window's first, and some slack.
const ringLen = 64

const (
	countBits = 40 // up to 10^12 a second in one slot
	countMask = 1<<countBits - 1
	stampMask = 1<<(64-countBits) - 1 // the second, modulo 2^24 (194 days)
)

// slot counts events of one second.
type slot struct{ v atomic.Uint64 }

func stamp(sec int64) uint64 { return (uint64(sec) & stampMask) << countBits }

// add adds n to the count of second sec, resetting the slot first if it
// holds an older second.
func (s *slot) add(sec int64, n uint64) {
	st := stamp(sec)
	for {
		old := s.v.Load()
		if old&^countMask == st {
			// Same second: a plain add. A reset by another goroutine could
			// only come from a second ringLen seconds later.
			s.v.Add(n)
			return
		}
		if s.v.CompareAndSwap(old, st|n&countMask) {
			return
		}
	}
}

// get returns the count of second sec: 0 if the slot holds another second.
func (s *slot) get(sec int64) uint64 {
	v := s.v.Load()
	if v&^countMask != stamp(sec) {
		return 0
	}
	return v & countMask
}

// ring counts events per second over the last ringLen seconds.
type ring [ringLen]slot

func ringIndex(sec int64) int { return int((sec%ringLen + ringLen) % ringLen) }

func (r *ring) add(sec int64, n uint64) { r[ringIndex(sec)].add(sec, n) }

func (r *ring) get(sec int64) uint64 { return r[ringIndex(sec)].get(sec) }

// sumInto adds the counts of the len(out) seconds ending at end to out,
// oldest first: out[i] is second end-len(out)+1+i. len(out) must be less
// than ringLen.
func (r *ring) sumInto(out []uint64, end int64) {
	for i := range out {
		out[i] += r.get(end - int64(len(out)) + 1 + int64(i))
	}
}
