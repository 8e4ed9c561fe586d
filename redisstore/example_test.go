package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// A store on a rueidis client. The same code works with a Cluster or
// Sentinel client; concurrent decisions are auto-pipelined.
// (No output is checked: the example needs a Redis server.)
func ExampleNew() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // the caller owns the client

	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:rl:"))
	if err != nil {
		log.Fatal(err)
	}

	res, err := store.AllowN(context.Background(), "user:42", redlimit.PerMinute(100).SlidingLog(), 1)
	if err != nil {
		log.Fatal(err) // Redis unreachable, timeout, bad reply: not a denial
	}
	if !res.Allowed {
		fmt.Println("denied; retry after", res.RetryAfter)
		return
	}
	fmt.Println("allowed;", res.Remaining, "left")
}

// A store on a go-redis client the application already has: a *redis.Client,
// *redis.ClusterClient or *redis.Ring.
// (No output is checked: the example needs a Redis server.)
func ExampleNewGoRedis() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()

	store, err := redisstore.NewGoRedis(client)
	if err != nil {
		log.Fatal(err)
	}

	// On one server both limits are decided atomically in one script call.
	// On Cluster these two keys hash to different slots; Store.AllowAll says
	// how such a decision is made.
	d, err := store.AllowAll(context.Background(), []redlimit.Request{
		{Key: "ip:192.0.2.1", Limit: redlimit.PerSecond(5), Cost: 1},
		{Key: "user:42", Limit: redlimit.PerHour(1000).TokenBucket(50), Cost: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Println("denied; retry after", d.RetryAfter())
		return
	}
	fmt.Println("allowed")
}
