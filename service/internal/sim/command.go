package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
)

const usageText = `Usage: redlimit simulate [flags]

Replays a traffic pattern through every rate-limiting algorithm (fixed_window,
sliding_log, sliding_window, token_bucket) on a virtual clock, and reports for
each how many requests it admitted and denied, the most it admitted in any
interval of one period, and how far that is over the limit. The sliding window
counter is also compared with the exact sliding log. Nothing sleeps and no
Redis is needed: a day of traffic takes about a second.

Patterns (--pattern):
  straddle  --limit requests spread over the last tenth of a period and as
            many over the first tenth of the next: the fixed window's 2x case.
            Lasts three periods.
  steady    --rate requests per second, evenly spaced, for --duration.
  bursts    --size requests at once every --every, for --duration.
  poisson   random arrivals at --rate per second on average, for --duration;
            --seed picks the arrivals.
  csv       the timestamps in --csv, one request a line: seconds from the
            start (0.25) or RFC 3339 times (2024-05-01T12:00:00.25Z), one form
            per file; further fields, blank lines, # comments and a header
            line are ignored. Giving --csv implies --pattern csv.

Output: a table on standard output (--json for JSON instead), and with --svg
a chart: admitted requests in the last period per algorithm against the
limit, and denied requests over time.

Flags:
`

const usageExamples = `
Examples:
  redlimit simulate --pattern straddle --limit 100 --period 1m --svg straddle.svg
  redlimit simulate --pattern poisson --rate 2 --duration 24h --limit 100 --period 1m
  redlimit simulate --pattern bursts --size 50 --every 20s --limit 100 --period 1m --burst 20
  redlimit simulate --csv requests.csv --limit 10 --period 1s --json

Exit status: 0 on success, 2 for bad flags, 1 when the simulation or its
output fails.
`

// flagsUsed lists, per pattern, the pattern flags it reads; the others are
// errors, so that a misspelt pattern does not silently ignore a flag.
var flagsUsed = map[string][]string{
	"straddle": {},
	"steady":   {"rate", "duration"},
	"bursts":   {"size", "every", "duration"},
	"poisson":  {"rate", "duration", "seed"},
	"csv":      {"csv"},
}

var patternFlags = []string{"rate", "duration", "size", "every", "seed", "csv"}

// command holds the parsed flags of Main.
type command struct {
	pattern    string
	limit      int64
	period     time.Duration
	burst      int64
	rate       float64
	duration   time.Duration
	size       int
	every      time.Duration
	seed       uint64
	csv        string
	svg        string
	json       bool
	algorithms string
}

func newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("redlimit simulate", flag.ContinueOnError)
	fs.StringVar(&c.pattern, "pattern", "straddle", "traffic `pattern`: straddle, steady, bursts, poisson or csv")
	fs.Int64Var(&c.limit, "limit", 100, "the limit's `count` of requests per period")
	fs.DurationVar(&c.period, "period", time.Minute, "the limit's `period`")
	fs.Int64Var(&c.burst, "burst", 0, "the token bucket's burst (0: the limit's count)")
	fs.Float64Var(&c.rate, "rate", 0, "steady and poisson: `requests` per second (0: twice the limit's rate)")
	fs.DurationVar(&c.duration, "duration", 0, "steady, bursts and poisson: how long the traffic lasts (0: ten periods)")
	fs.IntVar(&c.size, "size", 0, "bursts: requests per burst (0: the limit's count)")
	fs.DurationVar(&c.every, "every", 0, "bursts: time from one burst to the next (0: the period)")
	fs.Uint64Var(&c.seed, "seed", 1, "poisson: random seed; the same seed gives the same arrivals")
	fs.StringVar(&c.csv, "csv", "", "csv: `file` of request timestamps")
	fs.StringVar(&c.svg, "svg", "", "write the chart to `file` (- for standard output, in place of the table)")
	fs.BoolVar(&c.json, "json", false, "print the report as JSON instead of a table")
	fs.StringVar(&c.algorithms, "algorithms", "", "comma-separated `list` of algorithms to run (default all four)")
	return fs
}

// Main runs "redlimit simulate" with args, the arguments after the
// subcommand's name. It returns the exit status: 0 on success, 2 for bad
// flags (the message goes to stderr), 1 when the simulation or its output
// fails. -h prints the help, which documents every flag, to stdout.
// The report goes to stdout, as a table or with --json as JSON; the chart
// goes to the --svg file.
func Main(args []string, stdout, stderr io.Writer) int {
	var c command
	fs := newFlagSet(&c)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // the help goes to stdout, and only when asked for
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeUsage(fs, stdout)
			return 0
		}
		// The flag package has printed the error.
		fmt.Fprintln(stderr, "run 'redlimit simulate -h' for help")
		return 2
	}
	if c.svg == "-" && c.json {
		fmt.Fprintln(stderr, "redlimit simulate: --json and --svg - both write to standard output: give --svg a file")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "redlimit simulate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.csv != "" && !set["pattern"] {
		c.pattern = "csv"
	}

	limit, p, opts, err := c.build(set)
	if err != nil {
		fmt.Fprintf(stderr, "redlimit simulate: %v\n", err)
		return 2
	}
	r, err := Run(context.Background(), limit, p, opts)
	if err != nil {
		fmt.Fprintf(stderr, "redlimit simulate: %v\n", err)
		return 1
	}
	switch {
	case c.svg == "-":
		// The chart takes standard output.
	case c.json:
		err = r.WriteJSON(stdout)
	default:
		err = r.WriteTable(stdout)
	}
	if err == nil && c.svg != "" {
		err = writeSVGFile(r, c.svg, stdout)
		if err == nil && c.svg != "-" {
			fmt.Fprintf(stderr, "wrote %s\n", c.svg)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "redlimit simulate: %v\n", err)
		return 1
	}
	return 0
}

func writeUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, usageText)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprint(w, usageExamples)
}

// build turns the flags into Run's arguments.
func (c *command) build(set map[string]bool) (redlimit.Limit, Pattern, *Options, error) {
	limit := redlimit.Limit{Count: c.limit, Period: c.period, Burst: c.burst}
	if c.limit < 1 {
		return limit, Pattern{}, nil, fmt.Errorf("--limit %d: must be at least 1", c.limit)
	}
	if c.period < redlimit.MinPeriod {
		return limit, Pattern{}, nil, fmt.Errorf("--period %s: must be at least %s", c.period, redlimit.MinPeriod)
	}
	if c.burst < 0 {
		return limit, Pattern{}, nil, fmt.Errorf("--burst %d: must not be negative", c.burst)
	}
	used, ok := flagsUsed[c.pattern]
	if !ok {
		return limit, Pattern{}, nil, fmt.Errorf("--pattern %q: want straddle, steady, bursts, poisson or csv", c.pattern)
	}
	for _, name := range patternFlags {
		if set[name] && !slices.Contains(used, name) {
			return limit, Pattern{}, nil, fmt.Errorf("--%s does not apply to --pattern %s", name, c.pattern)
		}
	}

	var opts *Options
	if c.algorithms != "" {
		opts = &Options{}
		for _, name := range strings.Split(c.algorithms, ",") {
			a, err := redlimit.ParseAlgorithm(strings.TrimSpace(name))
			if err != nil {
				return limit, Pattern{}, nil, fmt.Errorf("--algorithms: %w", err)
			}
			opts.Algorithms = append(opts.Algorithms, a)
		}
	}

	rate := c.rate
	if rate == 0 {
		rate = 2 * float64(c.limit) / c.period.Seconds()
	}
	d := c.duration
	if d == 0 {
		d = 10 * c.period
	}
	var (
		p   Pattern
		err error
	)
	switch c.pattern {
	case "straddle":
		p, err = Straddle(c.limit, c.period)
	case "steady":
		p, err = Steady(rate, d)
	case "bursts":
		size, every := c.size, c.every
		if size == 0 {
			size = int(min(c.limit, MaxArrivals))
		}
		if every == 0 {
			every = c.period
		}
		p, err = Bursts(size, every, d)
	case "poisson":
		p, err = Poisson(rate, d, c.seed)
	case "csv":
		p, err = readCSV(c.csv)
	}
	return limit, p, opts, err
}

// readCSV parses the timestamp file at path, naming the pattern after it.
func readCSV(path string) (Pattern, error) {
	if path == "" {
		return Pattern{}, errors.New("--pattern csv needs --csv file")
	}
	f, err := os.Open(path)
	if err != nil {
		return Pattern{}, err
	}
	defer f.Close()
	p, err := ParseCSV(f)
	if pe, ok := errors.AsType[*ParseError](err); ok {
		return Pattern{}, fmt.Errorf("%s:%d: %s", path, pe.Line, pe.detail())
	}
	if err != nil {
		return Pattern{}, fmt.Errorf("%s: %w", path, err)
	}
	p.Name = fmt.Sprintf("%s (%d requests)", filepath.Base(path), len(p.Offsets))
	return p, nil
}

// writeSVGFile writes r's chart to path, or to stdout for "-".
func writeSVGFile(r *Report, path string, stdout io.Writer) error {
	if path == "-" {
		return r.WriteSVG(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
