// Package sim replays traffic through the four rate-limiting algorithms on
// a virtual clock. It reports how each one held the limit. It is the
// library behind "redlimit simulate".
//
//	p, err := sim.Straddle(100, time.Minute)
//	...
//	r, err := sim.Run(ctx, redlimit.PerMinute(100), p, nil)
//	...
//	r.WriteTable(os.Stdout)
//	r.WriteSVG(f)
//
// # Patterns
//
// A [Pattern] is a list of request arrivals, as offsets from a start
// instant:
//   - [Steady] spaces requests evenly;
//   - [Bursts] sends several at once at a fixed interval;
//   - [Straddle] puts a limit's worth on either side of a window boundary,
//     where a fixed window admits twice its count;
//   - [Poisson] draws random arrivals from a seed;
//   - [ParseCSV] reads timestamps from a file, in seconds or RFC 3339. It
//     names the line of any that does not parse.
//
// # Simulating
//
// [Run] takes a limit's count and period. It decides every arrival with
// each algorithm: fixed_window, sliding_log, sliding_window and
// token_bucket. The bucket's burst is the limit's Burst, or its Count. A
// [github.com/redlimit/redlimit/memory.Store] makes the decisions: the
// reference the Redis scripts follow. Its clock is set to each arrival in
// turn. So nothing sleeps and no Redis is needed. Unless the pattern has
// its own start, offset 0 is a window boundary. So offsets read as
// positions in the limit's windows.
//
// # Reading a report
//
// For each algorithm the [Report] gives the requests admitted and denied.
// It gives the most admitted in any interval one period long: the
// quantity the limit is about. It gives how far that exceeds the limit's
// count. The sliding log is exact, so its maximum never exceeds the count.
// The fixed window's can reach twice the count across a boundary. The
// token bucket's reaches Burst plus the refills of one period. The
// sliding window counter is compared with the sliding log on the same
// arrivals. The report gives the difference in requests admitted, in the
// busiest interval, and the number of requests decided differently.
//
// A report renders as an aligned table ([Report.WriteTable]) and as JSON
// ([Report.MarshalJSON]). It also renders as an SVG chart drawn with
// [gonum.org/v1/plot] ([Report.WriteSVG]). The chart shows requests
// admitted in the last period per algorithm against the limit, and
// requests denied over time.
//
// # Command
//
// [Main] is "redlimit simulate". It parses the flags (-h documents them)
// and runs the simulation. It writes the table or JSON, and the chart with
// --svg.
package sim
