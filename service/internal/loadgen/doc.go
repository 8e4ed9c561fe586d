// Package loadgen is the load generator behind `redlimit bench`. It puts
// a closed-loop load on a rate limiter. It measures decisions per second,
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
// A service decides with its own configuration. Each request holds one
// descriptor in a domain, with one entry whose value is the key (see
// [GRPCTarget]). The cost goes as hits_addend. [TargetFunc] makes a Target
// of any function.
//
// # The load
//
// [Run] starts Options.Concurrency workers. Each asks for one decision,
// waits for the answer, and asks again at once, for Options.Duration. It
// is a closed loop. Its rate is what the target sustains at that
// concurrency, not a rate chosen in advance. Each decision is for one of
// Options.Keys keys. Keys are drawn uniformly, or from a Zipf distribution
// in which a few keys are hot ([Distribution]). Every worker draws from
// its own generator, seeded from Options.Seed. So the keys each worker
// asks for can be repeated. With Options.Decisions, the run is sized by
// its decisions instead of its time (a benchmark's b.N). A [WorkerTarget]
// gives each worker a target of its own, a connection each. The service's
// BenchmarkRLS drives its targets so.
//
// # Measuring
//
// A worker times each Decide call. It records the latency, in
// nanoseconds, into an HDR histogram of its own
// (github.com/HdrHistogram/hdrhistogram-go, three significant digits, up
// to a minute). It counts allowed, denied and failed decisions in atomic
// counters of its own. So no lock is taken per decision. The histograms
// are merged when the run ends. Latencies include the client's work
// (encoding, the connection), as the target's caller sees them. Failed
// decisions are counted but not timed.
//
// A progress line is written every second (Options.Progress). The
// [Result] has the counts, the rate, and p50, p90, p99, p99.9 and max
// latencies. [Result.WriteSummary] writes it for people.
// [Result.MarshalJSON] writes it as JSON, with stable field names and
// durations in microseconds.
//
// # Command
//
// [Main] is `redlimit bench`. Its flags set the target, the limit, the
// load and the output. They are checked before anything runs: a wrong one
// gets exit status 2 and a message. Run it with -help for the list.
package loadgen
