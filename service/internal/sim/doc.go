// Package sim replays traffic through the four rate-limiting algorithms on a
// virtual clock and reports how each one held the limit: the library behind
// "redlimit simulate".
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
// instant. [Steady] spaces requests evenly, [Bursts] sends several at once
// at a fixed interval, [Straddle] puts a limit's worth on either side of a
// window boundary (the case where a fixed window admits twice its count),
// [Poisson] draws random arrivals from a seed, and [ParseCSV] reads
// timestamps from a file, in seconds or RFC 3339, naming the line of any
// that does not parse.
//
// # Simulating
//
// [Run] takes a limit's count and period and decides every arrival with
// each algorithm: fixed_window, sliding_log, sliding_window and token_bucket
// (whose burst is the limit's Burst, or its Count). The decisions are made
// by a [github.com/redlimit/redlimit/memory.Store], the reference the Redis
// scripts follow, whose clock is set to each arrival in turn: nothing
// sleeps and no Redis is needed, so a day of traffic at a few requests a
// second takes well under a second. Unless the pattern has its own start,
// offset 0 is a window boundary, so offsets read as positions in the
// limit's windows.
//
// # Reading a report
//
// For each algorithm the [Report] gives the requests admitted and denied,
// the most admitted in any interval one period long (the quantity the limit
// is about), and how far that exceeds the limit's count. The sliding log is
// exact, so its maximum never exceeds the count; the fixed window's can
// reach twice the count across a boundary; the token bucket's reaches Burst
// plus the refills of one period. The sliding window counter is compared
// with the sliding log on the same arrivals: the difference in requests
// admitted, in the busiest interval, and the number of requests decided
// differently.
//
// A report renders as an aligned table ([Report.WriteTable]), as JSON
// ([Report.MarshalJSON]) and as an SVG chart drawn with
// [gonum.org/v1/plot] ([Report.WriteSVG]): requests admitted in the last
// period per algorithm against the limit, and requests denied over time.
//
// # Command
//
// [Main] is "redlimit simulate": it parses the flags (-h documents them),
// runs the simulation and writes the table or JSON, and the chart with
// --svg.
package sim
