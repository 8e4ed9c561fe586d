// Package redlimittest is the conformance suite every [redlimit.Limiter]
// store runs, in the manner of testing/slogtest. It is one table of steps
// over fixed instants. The memory store and Redis, through each client
// library, run the same table. A new store proves itself the same way.
//
//	func TestConformance(t *testing.T) {
//		redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
//			s, err := memory.New(memory.WithClock(now))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The factory must return a store that reads the time from now. Run gives
// every key a random suffix, so stores may share a backend between runs.
// The steps jump between instants faster than real time passes. A store
// that expires state on its own clock (Redis TTLs) should lengthen its
// expiry for the run (redisstore.WithTTLMargin).
package redlimittest
