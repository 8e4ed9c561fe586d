package redlimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// t0 is the fixed instant the examples decide at, so their output is stable.
var t0 = time.Unix(1_700_000_000, 0)

// A store decides requests; a denial is a Result, and an error means the
// decision could not be made (bad input, store down).
func Example() {
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	limit := redlimit.PerSecond(3).SlidingLog()
	for i := 1; i <= 4; i++ {
		res, err := store.AllowN(ctx, "user:42", limit, 1)
		if err != nil {
			log.Fatal(err)
		}
		if !res.Allowed {
			fmt.Printf("request %d: denied, retry after %s\n", i, res.RetryAfter)
			continue
		}
		fmt.Printf("request %d: allowed, %d of %d remaining\n", i, res.Remaining, res.Max)
	}

	// A cost above the limit can never pass.
	res, err := store.AllowN(ctx, "user:7", limit, 5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cost 5 never passes:", res.RetryAfter == redlimit.Never)

	// Bad input is an error wrapping a sentinel.
	_, err = store.AllowN(ctx, "", limit, 1)
	fmt.Println("empty key:", errors.Is(err, redlimit.ErrInvalidKey))

	// Output:
	// request 1: allowed, 2 of 3 remaining
	// request 2: allowed, 1 of 3 remaining
	// request 3: allowed, 0 of 3 remaining
	// request 4: denied, retry after 1s
	// cost 5 never passes: true
	// empty key: true
}

// Several limits decided as one: a request passes only if every limit allows
// it, and a denied request consumes nothing from any of them.
func ExampleLimiter_AllowAll() {
	clock := redlimittest.NewClock(t0)
	store, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	reqs := []redlimit.Request{
		{Key: "ip:192.0.2.1", Limit: redlimit.PerSecond(1).TokenBucket(2), Cost: 1},
		{Key: "user:42", Limit: redlimit.PerMinute(3).SlidingLog(), Cost: 1},
	}
	for i, wait := range []time.Duration{0, 0, 0, time.Second, 4 * time.Second} {
		clock.Advance(wait)
		d, err := store.AllowAll(context.Background(), reqs)
		if err != nil {
			log.Fatal(err)
		}
		t := d.Tightest()
		if d.Allowed {
			fmt.Printf("request %d: allowed; tightest %q has %d left\n", i+1, reqs[t].Limit, d.Results[t].Remaining)
		} else {
			fmt.Printf("request %d: denied by %q; retry after %s\n", i+1, reqs[t].Limit, d.RetryAfter())
		}
	}

	// Output:
	// request 1: allowed; tightest "1/1s token_bucket burst 2" has 1 left
	// request 2: allowed; tightest "1/1s token_bucket burst 2" has 0 left
	// request 3: denied by "1/1s token_bucket burst 2"; retry after 1s
	// request 4: allowed; tightest "1/1s token_bucket burst 2" has 0 left
	// request 5: denied by "3/1m sliding_log"; retry after 55s
}

// Build a Limit from a rate, then pick its algorithm; the default is the
// sliding window counter.
func ExampleLimit_String() {
	fmt.Println(redlimit.PerSecond(10))
	fmt.Println(redlimit.PerMinute(100).SlidingLog())
	fmt.Println(redlimit.PerSecond(10).TokenBucket(20))
	fmt.Println(redlimit.Per(1000, time.Hour).FixedWindow())

	// The zero Limit has no algorithm.
	fmt.Println(errors.Is(redlimit.Limit{}.Validate(), redlimit.ErrUnknownAlgorithm))

	// Output:
	// 10/1s sliding_window
	// 100/1m sliding_log
	// 10/1s token_bucket burst 20
	// 1000/1h fixed_window
	// true
}

// Debit records a cost known only after the work is done (the tokens a
// model's answer used): it is counted even when it does not fit, and the
// key stays in debt, denying requests, until the debt has drained.
func ExampleDebit() {
	clock := redlimittest.NewClock(t0)
	store, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	budget := redlimit.PerMinute(1000).FixedWindow() // tokens per minute
	check := func() {
		// Enough budget left for a request? Peek consumes nothing.
		res, err := store.Peek(ctx, "user:42", budget, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("check: allowed %v, %d left\n", res.Allowed, res.Remaining)
	}
	debit := func(tokens int64) {
		res, err := redlimit.Debit(ctx, store, "user:42", budget, tokens)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("debit %d: fit %v, %d left\n", tokens, res.Allowed, res.Remaining)
	}

	check()
	debit(900)
	check()
	debit(900) // counted although it does not fit: 1800 of 1000 spent
	check()
	clock.Advance(time.Minute) // the next window: the debt has drained
	check()

	// Output:
	// check: allowed true, 999 left
	// debit 900: fit true, 100 left
	// check: allowed true, 99 left
	// debit 900: fit false, 0 left
	// check: allowed false, 0 left
	// check: allowed true, 999 left
}
