package redlimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// A calendar quota: 1,000 calls per calendar month, reset on the 1st at
// midnight in Europe/Berlin. ResetAfter is the time to that instant.
func ExamplePerCalendar() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	clock := redlimittest.NewClock(time.Date(2028, 2, 29, 18, 0, 0, 0, berlin))
	store, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	monthly := redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin")
	res, err := store.AllowN(context.Background(), "tenant-42", monthly, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(monthly, res.Allowed, res.Remaining)
	fmt.Println("resets at", clock.Now().Add(res.ResetAfter).In(berlin).Format(time.DateTime))

	// Other algorithms have no windows to align.
	fmt.Println(monthly.SlidingWindow().Validate())
	// Output:
	// 1000/calendar month Europe/Berlin fixed_window true 999
	// resets at 2028-03-01 00:00:00
	// redlimit: calendar periods need fixed_window: sliding_window has no windows to align (use fixed_window)
}
