package sim

import "sort"

// maxInWindow returns the most of times (sorted µs instants) that fall in
// any half-open interval [t, t+w). It also returns the earliest instant of
// the first such interval. That is the window a sliding log enforces: an
// entry leaves it exactly w after it was made.
func maxInWindow(times []int64, w int64) (most int, from int64) {
	j := 0
	for i, t := range times {
		for times[j] <= t-w {
			j++
		}
		if n := i - j + 1; n > most {
			most, from = n, times[j]
		}
	}
	return most, from
}

// rolling returns, for each of times (sorted µs instants), how many of times
// fall in (t-w, t], that is, how many the last window holds just after it.
func rolling(times []int64, w int64) []int {
	out := make([]int, len(times))
	j := 0
	for i, t := range times {
		for times[j] <= t-w {
			j++
		}
		out[i] = i - j + 1
	}
	return out
}

// upper returns how many of times are at or before t.
func upper(times []int64, t int64) int {
	return sort.Search(len(times), func(i int) bool { return times[i] > t })
}

// lower returns how many of times are before t.
func lower(times []int64, t int64) int {
	return sort.Search(len(times), func(i int) bool { return times[i] >= t })
}
