package sim_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/sim"
)

// A limit's worth of requests on either side of a window boundary: the
// fixed window admits all of them, twice its limit within one minute; the
// sliding log holds the limit exactly.
func Example() {
	p, err := sim.Straddle(100, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	r, err := sim.Run(context.Background(), redlimit.PerMinute(100), p, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.WriteTable(os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// pattern:  straddle: 100 before and 100 after a 1m boundary
	// limit:    100 per 1m (token bucket burst 100)
	// requests: 200 over 3m0s
	//
	// ALGORITHM       ADMITTED  DENIED  MAX IN 1m  OVER LIMIT     BUSIEST 1m FROM
	// fixed_window    200       0       200        +100 (100.0%)  54s
	// sliding_log     100       100     100        0              54s
	// sliding_window  109       91      109        +9 (9.0%)      54s
	// token_bucket    119       81      119        +19 (19.0%)    54s
	//
	// sliding_window vs the exact sliding_log: +9 admitted, +9 in the busiest 1m, 9 of 200 decisions differ
}

// Timestamps from a file, in seconds from the start: 12 requests in the last
// quarter second of one window and 12 in the first of the next.
func ExampleParseCSV() {
	var b strings.Builder
	b.WriteString("timestamp\n")
	for i := range 12 {
		fmt.Fprintf(&b, "%.2f\n%.2f\n", 0.75+float64(i)*0.02, 1+float64(i)*0.02)
	}
	p, err := sim.ParseCSV(strings.NewReader(b.String()))
	if err != nil {
		log.Fatal(err)
	}
	r, err := sim.Run(context.Background(), redlimit.PerSecond(12), p, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range r.Algorithms {
		fmt.Printf("%-15s admitted %2d, at most %2d in one second\n", a.Algorithm, a.Admitted, a.MaxInWindow)
	}
	// Output:
	// fixed_window    admitted 24, at most 24 in one second
	// sliding_log     admitted 12, at most 12 in one second
	// sliding_window  admitted 14, at most 14 in one second
	// token_bucket    admitted 17, at most 17 in one second
}
