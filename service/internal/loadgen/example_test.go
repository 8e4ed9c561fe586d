package loadgen_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/service/internal/loadgen"
)

// Load the memory store with 8 workers for 200 ms, over 100 keys of which a
// few are hot, each allowed 100 requests per second.
func ExampleRun() {
	store, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	target := &loadgen.LimiterTarget{Limiter: store, Limit: redlimit.PerSecond(100), Name: "memory"}
	res, err := loadgen.Run(context.Background(), target, loadgen.Options{
		Concurrency:  8,
		Duration:     200 * time.Millisecond,
		Keys:         100,
		Distribution: loadgen.Zipf,
	})
	if err != nil {
		log.Fatal(err)
	}
	// res.WriteSummary(os.Stdout) prints the figures; they vary from run to run.
	fmt.Println(res.Limit)
	fmt.Println(res.Decisions > 0, res.Allowed+res.Denied+res.Errors == res.Decisions, res.Latency.P99 <= res.Latency.Max)
	// Output:
	// 100/1s sliding_window
	// true true true
}

// Load a rate limit service over gRPC: each request is in the domain "api"
// with one descriptor entry {user: <key>}. (This example needs a running
// service, so it is only compiled.)
func ExampleDialGRPC() {
	target, err := loadgen.DialGRPC("127.0.0.1:8081")
	if err != nil {
		log.Fatal(err)
	}
	defer target.Close()
	target.Domain, target.DescriptorKey = "api", "user"
	res, err := loadgen.Run(context.Background(), target, loadgen.Options{Duration: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	res.WriteSummary(os.Stdout)
}

// Load the same service's POST /json endpoint.
func ExampleNewJSONTarget() {
	target := loadgen.NewJSONTarget("http://127.0.0.1:8080/json")
	defer target.Close()
	target.Domain, target.DescriptorKey = "api", "user"
	res, err := loadgen.Run(context.Background(), target, loadgen.Options{Duration: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	res.WriteSummary(os.Stdout)
}

// Main is `redlimit bench`: the command passes its flags and exits with
// what Main returns.
func ExampleMain() {
	os.Exit(loadgen.Main([]string{"--target", "memory", "--algorithm", "token_bucket", "--limit", "100", "--burst", "20"}, os.Stdout, os.Stderr))
}
