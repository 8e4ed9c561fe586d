// Package loadgen is the load generator behind `redlimit bench`: it puts a
// closed-loop load on a rate limiter and measures decisions per second,
// allowed, denied and failed decisions, and latency percentiles. The
// figures of docs/BENCHMARKS.md come from it.
//
//	store, _ := memory.New()
//	defer store.Close()
//	target := &loadgen.LimiterTarget{Limiter: store, Limit: redlimit.PerSecond(100), Name: "memory"}
//	res, err := loadgen.Run(ctx, target, loadgen.Options{Concurrency: 64, Duration: 10 * time.Second})
//	...
//	res.WriteSummary(os.Stdout)
//
// # Targets
//
// A [Target] decides one request for a key at a cost. There are three:
//
//   - [LimiterTarget]: a redlimit.Limiter in this process, such as the
//     memory store or a redisstore.Store (redisstore.Open takes a Redis URL),
//     with one [redlimit.Limit] for every key;
//   - [GRPCTarget]: a running rate limit service, over the Envoy RLS v3
//     gRPC API;
//   - [JSONTarget]: the same service's POST /json endpoint, with the same
//     request in protojson, 200 meaning allowed and 429 denied.
//
// A service decides with its own configuration: each request holds one
// descriptor in a domain, with one entry whose value is the key (see
// [GRPCTarget]), and the cost as hits_addend. [TargetFunc] makes a Target of
// any function.
//
// # The load
//
// [Run] starts Options.Concurrency workers. Each asks for one decision,
// waits for the answer, and asks again at once, for Options.Duration: a
// closed loop, whose rate is what the target sustains at that concurrency,
// not a rate chosen in advance. Each decision is for one of Options.Keys
// keys, drawn uniformly or from a Zipf distribution in which a few keys are
// hot ([Distribution]); every worker draws from its own generator, seeded
// from Options.Seed, so the keys each worker asks for can be repeated.
// With Options.Decisions the run is sized by its decisions instead of its
// time (a benchmark's b.N), and a [WorkerTarget] gives each worker a target
// of its own (a connection each): the service's BenchmarkRLS drives its
// targets so.
//
// # Measuring
//
// A worker times each Decide call and records the latency, in nanoseconds,
// into an HDR histogram of its own (github.com/HdrHistogram/hdrhistogram-go,
// three significant digits, up to a minute), and counts allowed, denied and
// failed decisions in atomic counters of its own: no lock is taken per
// decision. The histograms are merged when the run ends. Latencies include
// the client's work (encoding, the connection), as the target's caller
// sees them; failed decisions are counted but not timed.
//
// A progress line is written every second (Options.Progress), and the
// [Result] has the counts, the rate, and p50, p90, p99, p99.9 and max
// latencies. [Result.WriteSummary] writes it for people; [Result.MarshalJSON]
// as JSON with stable field names and durations in microseconds.
//
// # Command
//
// [Main] is `redlimit bench`: flags for the target, the limit, the load and
// the output, checked before anything runs (exit status 2 and a message when
// one is wrong). Run it with -help for the list.
package loadgen
