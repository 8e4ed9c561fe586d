package resilient

import (
	"math"
	"time"

	"github.com/redlimit/redlimit"
)

// accrual follows what a state's owed units would still weigh in the
// store's state, had the store counted each when this node did. A charge
// is of that much only (see due). Times are nanoseconds of the Limiter's
// mono.
type accrual struct {
	// first is, for a token bucket, when its first unit was counted; for
	// the other algorithms, the period slot of recent[0].
	first int64
	// level is, for a token bucket, the units spent above this node's
	// share of the refill since first, as of the debt's last unit.
	level float64
	// recent holds, for the other algorithms, the units counted per
	// period slot, newest first.
	recent [3]int64
	nodes  int32 // the live nodes when the last unit was counted
}

// perToken returns the nanoseconds this node's share of limit's refill
// takes per token: the store's emission interval times the nodes.
func (a *accrual) perToken(limit redlimit.Limit) float64 {
	return float64(limit.EmissionInterval()) * float64(time.Microsecond) * float64(max(1, a.nodes))
}

// slot returns the period slot of t.
func slot(limit redlimit.Limit, t int64) int64 {
	p := int64(limit.Period)
	s := t / p
	if t < 0 && t%p != 0 {
		s--
	}
	return s
}

// add records n units counted at at, when the debt owed units counted
// up to last (none when units is 0), with nodes live. A time before last
// (a charge given back, or a clock stepped back) counts as last for what
// it may take off; the units stay whole. full is when the store last said
// the state would be full again: a token bucket's first unit finds it
// refilled since, had no other node spent it (MaxInt64: empty).
func (a *accrual) add(limit redlimit.Limit, nodes int, units, last, n, at, full int64) {
	a.nodes = int32(min(nodes, math.MaxInt32))
	if limit.Algorithm == redlimit.TokenBucket {
		switch {
		case units == 0:
			// A bucket that held h tokens is one empty h emissions before.
			burst := float64(limit.Burst) * float64(limit.EmissionInterval()) * float64(time.Microsecond)
			held := min(max(0, burst-max(0, float64(full)-float64(at))), 1<<61)
			a.first, a.level = at-int64(held), float64(n)
			if a.first > at {
				a.first = math.MinInt64 // wrapped
			}
		case at >= last:
			a.level = max(0, a.level-float64(at-last)/a.perToken(limit)) + float64(n)
		default:
			// Spent before the units owed: what of it is left by last.
			a.first = min(a.first, at)
			a.level += max(0, float64(n)-float64(last-at)/a.perToken(limit))
		}
		return
	}
	s := slot(limit, at)
	if units == 0 {
		a.first, a.recent = s, [3]int64{}
	}
	if k := s - a.first; k > 0 {
		if k >= int64(len(a.recent)) {
			a.recent = [3]int64{}
		} else {
			copy(a.recent[k:], a.recent[:int64(len(a.recent))-k])
			clear(a.recent[:k])
		}
		a.first = s
	}
	if k := a.first - s; k < int64(len(a.recent)) {
		a.recent[k] = min(redlimit.MaxCost, a.recent[k]+n)
	}
}

// due returns how many of units, the last counted at last, the store's
// state would still hold at now, had it counted each unit when this node
// did; at most units. Summed over the nodes, that is never less than
// what the store would hold, so a charge of it leaves the store no looser
// than if it had counted every unit.
//
// A sliding log or a fixed window holds the units of the last period. A
// sliding window holds those of the last two. due counts those of the
// period slots that reach back that far.
//
// A token bucket forgets what it spent once it has refilled it. A full
// bucket never refills: a refill above the burst is lost. This node takes
// its share of the refill, and of what the bucket held at its first unit.
// The share is rate, burst and held tokens over the live nodes. It owes
// the larger of two amounts. One is what its spending outran that refill
// (level, drawn down since last). The other is units less the refill
// above the share's burst since the bucket's share was empty (first).
// What the bucket held is what the store last told this node, refilled
// since. It is full if the store told nothing, as the local fallback
// takes it. Other nodes' spending this node has not heard of is not seen,
// as in the outage's own bound.
func (a *accrual) due(limit redlimit.Limit, units, last, now int64) int64 {
	if units <= 0 {
		return 0
	}
	if limit.Algorithm == redlimit.TokenBucket {
		per := a.perToken(limit)
		level := max(0, a.level-float64(max(0, now-last))/per)
		lost := max(0, float64(max(0, now-a.first))/per-float64(limit.Burst)/float64(max(1, a.nodes)))
		d := max(level, float64(units)-lost)
		return min(units, int64(math.Ceil(d-1e-9)))
	}
	back := int64(1) // slots back that the state still holds
	if limit.Algorithm == redlimit.SlidingWindow {
		back = 2
	}
	from, sum := slot(limit, now)-back, int64(0)
	for k, n := range a.recent {
		if a.first-int64(k) >= from {
			sum += n
		}
	}
	return min(units, sum)
}
