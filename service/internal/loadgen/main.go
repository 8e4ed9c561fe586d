package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

// Exit codes of [Main].
const (
	ExitOK      = 0 // the run finished (or was interrupted) and its result was written
	ExitFailure = 1 // the target could not be reached, or the result not written
	ExitUsage   = 2 // invalid flags
)

// Defaults of Main's flags that Options does not have.
const (
	DefaultRedisURL = "redis://127.0.0.1:6379"
	DefaultGRPCAddr = "127.0.0.1:8081"
	DefaultJSONAddr = "127.0.0.1:8080"
	// connectTimeout bounds opening the Redis store and the first decision.
	connectTimeout = 10 * time.Second
)

const helpHeader = `Usage: redlimit bench [flags]

Puts a closed-loop load on a rate limiter and reports what it measured:
--concurrency workers each ask for one decision at a time, for a key drawn
from --keys keys, as fast as the answers come, for --duration. A progress
line goes to stderr every second; the summary (decisions per second,
allowed, denied and error counts, latency percentiles from an HDR histogram)
goes to stdout, and with --json the result as JSON too.

Targets:
  memory   the memory store, in this process
  redis    a Redis store on --redis, in this process
  grpc     a running rate limit service, Envoy RLS v3 over gRPC on --addr
  json     a running rate limit service, POST /json on --addr
The memory and redis targets decide with the limit of --algorithm, --limit,
--period and --burst. A service decides with the limits of its configuration:
each request holds one descriptor in --domain with one entry
--descriptor-key=<key>, and --cost as hits_addend. Before the run, one
decision for the key <key-prefix>preflight checks that the target answers.

Examples:
  redlimit bench --target redis --redis redis://127.0.0.1:6379 --algorithm token_bucket --limit 100 --burst 20
  redlimit bench --target grpc --addr 127.0.0.1:8081 --domain api --descriptor-key user --dist zipf --json out.json

Exit status: 0 when the run is done (also when interrupted with Ctrl-C), 1 when
the target cannot be reached or the result cannot be written, 2 for invalid flags.

Flags (- or -- before a name alike):
`

// config is what Main's flags ask for.
type config struct {
	target, redisURL, addr string
	domain, descKey        string
	algorithm              redlimit.Algorithm
	limit                  redlimit.Limit
	opts                   Options
	jsonPath               string
	quiet                  bool
	set                    map[string]bool
}

// newFlagSet returns the flag set of Main writing into c.
func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("redlimit bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.target, "target", "memory", "what to load: `memory`, redis, grpc or json")
	fs.StringVar(&c.redisURL, "redis", DefaultRedisURL, "Redis `URL` of the redis target (redisstore.Open: standalone, Cluster, Sentinel, TLS)")
	fs.StringVar(&c.addr, "addr", "", "`host:port` of the service, for the grpc and json targets (default "+DefaultGRPCAddr+" for grpc, "+DefaultJSONAddr+" for json);\njson also takes a full URL such as http://host:port/json")
	fs.StringVar(&c.domain, "domain", DefaultDomain, "`domain` of the service requests (grpc, json)")
	fs.StringVar(&c.descKey, "descriptor-key", DefaultDescriptorKey, "`key` of the descriptor entry whose value is the request's key (grpc, json)")
	fs.TextVar(&c.algorithm, "algorithm", redlimit.SlidingWindow, "`algorithm` of the memory and redis targets: fixed_window, sliding_log, sliding_window or token_bucket")
	fs.Int64Var(&c.limit.Count, "limit", 100, "requests (units of cost) per --period allowed per key (memory, redis)")
	fs.DurationVar(&c.limit.Period, "period", time.Second, "`period` of the limit (memory, redis)")
	fs.Int64Var(&c.limit.Burst, "burst", 0, "token bucket capacity (token_bucket only; default --limit)")
	fs.IntVar(&c.opts.Concurrency, "concurrency", DefaultConcurrency, "number of workers, each with one decision in flight")
	fs.DurationVar(&c.opts.Duration, "duration", DefaultDuration, "how long to run")
	fs.IntVar(&c.opts.Keys, "keys", DefaultKeys, fmt.Sprintf("number of distinct keys, 1..%d", MaxKeys))
	fs.TextVar(&c.opts.Distribution, "dist", Uniform, "key `distribution`: uniform, or zipf (a few hot keys)")
	fs.Float64Var(&c.opts.ZipfS, "zipf-s", DefaultZipfS, "Zipf `exponent`, above 1: the larger, the hotter the hottest keys (--dist zipf)")
	fs.Int64Var(&c.opts.Cost, "cost", 1, "cost of every decision (hits_addend for the services)")
	fs.StringVar(&c.opts.KeyPrefix, "key-prefix", "", "`prefix` of the keys, which are <prefix>0, <prefix>1, ... (default bench:<random>:, so each run starts afresh)")
	fs.Uint64Var(&c.opts.Seed, "seed", 0, "seed of the key choices, to repeat a run's sequence of keys (default random)")
	fs.StringVar(&c.jsonPath, "json", "", "also write the result as JSON to `file` (- for stdout, the summary then going to stderr)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress lines")
	return fs
}

// usageError is an invalid flag: Main exits with ExitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseArgs reads Main's flags into a checked config.
func parseArgs(args []string) (*config, error) {
	c := &config{set: map[string]bool{}}
	fs := newFlagSet(c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	only := func(targets string, names ...string) error {
		for _, n := range names {
			if c.set[n] {
				return usagef("--%s applies to the %s target, not to %s", n, targets, c.target)
			}
		}
		return nil
	}
	var err error
	switch c.target {
	case "memory":
		err = errors.Join(only("redis", "redis"), only("grpc and json", "addr", "domain", "descriptor-key"))
	case "redis":
		err = only("grpc and json", "addr", "domain", "descriptor-key")
	case "grpc", "json":
		err = errors.Join(only("redis", "redis"),
			only("memory and redis", "algorithm", "limit", "period", "burst"))
		if err == nil && c.opts.Cost > math.MaxUint32 {
			err = usagef("--cost %d is above %d, the most hits_addend holds", c.opts.Cost, uint32(math.MaxUint32))
		}
		if err == nil && c.domain == "" {
			err = usagef("--domain is empty")
		}
		if err == nil && c.descKey == "" {
			err = usagef("--descriptor-key is empty")
		}
	default:
		err = usagef("--target %q: want memory, redis, grpc or json", c.target)
	}
	if err != nil {
		return nil, err
	}
	if c.target == "memory" || c.target == "redis" {
		c.limit.Algorithm = c.algorithm
		if c.algorithm == redlimit.TokenBucket {
			if !c.set["burst"] {
				c.limit.Burst = c.limit.Count
			}
		} else if c.set["burst"] {
			return nil, usagef("--burst applies to token_bucket only, not to %s", c.algorithm)
		} else {
			c.limit.Burst = 0
		}
		if err := c.limit.Validate(); err != nil {
			return nil, usagef("the limit (--algorithm, --limit, --period, --burst): %v", err)
		}
	}
	// Zero means "default" to Options; here every value is explicit.
	switch o := c.opts; {
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return nil, usagef("--concurrency %d is not in 1..%d", o.Concurrency, MaxConcurrency)
	case o.Duration <= 0:
		return nil, usagef("--duration %s is not positive", o.Duration)
	case o.Keys < 1 || o.Keys > MaxKeys:
		return nil, usagef("--keys %d is not in 1..%d", o.Keys, MaxKeys)
	case !(o.ZipfS > 1) || o.ZipfS > 1e6:
		return nil, usagef("--zipf-s %g is not above 1", o.ZipfS)
	case o.Cost < 1 || o.Cost > redlimit.MaxCost:
		return nil, usagef("--cost %d is not in 1..%d", o.Cost, int64(redlimit.MaxCost))
	}
	if c.set["zipf-s"] && c.opts.Distribution != Zipf {
		return nil, usagef("--zipf-s applies to --dist zipf only")
	}
	if c.addr == "" {
		c.addr = DefaultGRPCAddr
		if c.target == "json" {
			c.addr = DefaultJSONAddr
		}
	}
	if c.opts.KeyPrefix == "" {
		c.opts.KeyPrefix = fmt.Sprintf("bench:%06x:", rand.Uint32()>>8)
	}
	if _, err := c.opts.withDefaults(); err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

// open returns the target c asks for, and how to release it.
func (c *config) open(ctx context.Context) (Target, func() error, error) {
	switch c.target {
	case "memory":
		// Sized to hold every key of the run: it measures deciding, not
		// a full store refusing (--keys bounds the memory).
		s, err := memory.New(memory.WithMaxKeys(max(memory.DefaultMaxKeys, 2*(c.opts.Keys+1))), memory.WithMaxBytes(math.MaxInt64))
		if err != nil {
			return nil, nil, err
		}
		return &LimiterTarget{Limiter: s, Limit: c.limit, Name: "memory"}, s.Close, nil
	case "redis":
		ctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		s, err := redisstore.Open(ctx, c.redisURL)
		if err != nil {
			return nil, nil, err
		}
		return &LimiterTarget{Limiter: s, Limit: c.limit, Name: "redis " + redisstore.Redacted(c.redisURL)}, s.Close, nil
	case "grpc":
		t, err := DialGRPC(c.addr)
		if err != nil {
			return nil, nil, err
		}
		t.Domain, t.DescriptorKey = c.domain, c.descKey
		return t, t.Close, nil
	}
	url := c.addr
	if !strings.Contains(url, "://") {
		url = "http://" + url + "/json"
	}
	t := NewJSONTarget(url)
	t.Domain, t.DescriptorKey = c.domain, c.descKey
	return t, t.Close, nil
}

// Main runs `redlimit bench` with args (the flags after "bench") and
// returns the exit status: ExitOK, ExitFailure or ExitUsage. The summary
// goes to stdout (to stderr when --json - takes stdout), progress lines and
// errors to stderr. An interrupt (Ctrl-C) ends the run early, and its
// result is still written. Run with -help for the flags.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return mainContext(ctx, args, stdout, stderr)
}

func mainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(stdout, helpHeader)
		fs := newFlagSet(&config{})
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "redlimit bench: %v\nRun 'redlimit bench -help' for the flags.\n", err)
		return ExitUsage
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "redlimit bench: "+format+"\n", args...)
		return ExitFailure
	}

	target, closeTarget, err := c.open(ctx)
	if err != nil {
		return fail("%s target: %v", c.target, err)
	}
	defer closeTarget()
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	_, err = target.Decide(pctx, c.opts.KeyPrefix+"preflight", c.opts.Cost)
	cancel()
	if err != nil {
		return fail("%s does not answer: %v", describe(target), err)
	}

	summary := stdout
	if c.jsonPath == "-" {
		summary = stderr
	}
	if !c.quiet {
		c.opts.Progress = stderr
	}
	res, err := Run(ctx, target, c.opts)
	if err != nil {
		return fail("%v", err)
	}
	if err := res.WriteSummary(summary); err != nil {
		return fail("writing the summary: %v", err)
	}
	if c.jsonPath != "" {
		if err := writeJSON(c.jsonPath, stdout, res); err != nil {
			return fail("%v", err)
		}
	}
	return ExitOK
}

// writeJSON writes res, indented, to the file at path, or to stdout for "-".
func writeJSON(path string, stdout io.Writer, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
	} else {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}
