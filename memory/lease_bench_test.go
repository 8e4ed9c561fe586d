package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
)

// BenchmarkLeaseManyHeld: a renewal and a denied acquire on a key that
// holds n leases.
func BenchmarkLeaseManyHeld(b *testing.B) {
	for _, n := range []int{10, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := memory.New(memory.WithMaxKeys(1 << 21))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			c := redlimit.InFlight(int64(n), time.Hour)
			ctx := context.Background()
			for i := range n {
				if _, err := s.Acquire(ctx, "k", c, fmt.Sprint(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					s.Renew(ctx, "k", c, fmt.Sprint(i%n))
				} else {
					s.Acquire(ctx, "k", c, "late")
				}
			}
		})
	}
}
