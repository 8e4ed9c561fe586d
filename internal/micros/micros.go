// Package micros holds the range of times the stores compute with. They
// are integer microseconds from the Unix epoch to [Max], 2^52 µs (in
// 2112). There every quantity of their arithmetic stays below 2^53, which
// a Lua number on Redis holds exactly. A clock outside that range reads as
// the nearest bound, where time stands still. Nothing expires or refills
// there, so no limit admits more than its count. redisstore's scripts
// apply the same rule to the time they are given or read
// (lua/prelude.lua).
package micros

import "time"

// Max is the latest time the stores compute with, in µs after the Unix
// epoch.
const Max = 1 << 52

// Of returns t in µs after the Unix epoch, within [0, Max], whatever t is
// (t.UnixMicro alone wraps around beyond about 292,000 years).
func Of(t time.Time) int64 {
	switch s := t.Unix(); {
	case s < 0:
		return 0
	case s > Max/1_000_000:
		return Max
	}
	return Clamp(t.UnixMicro())
}

// Clamp returns us within [0, Max].
func Clamp(us int64) int64 { return min(max(us, 0), Max) }
