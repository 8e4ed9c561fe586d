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

// BenchmarkLeaseFullStore: a new key's acquire, denied by a store whose
// 100,000 leases, one a key, fill its bound.
func BenchmarkLeaseFullStore(b *testing.B) {
	const n = 100_000
	s, err := memory.New(memory.WithMaxKeys(n))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := redlimit.InFlight(1, time.Hour)
	ctx := context.Background()
	for i := range n {
		if l, err := s.Acquire(ctx, fmt.Sprint(i), c, "x"); err != nil || !l.Held {
			b.Fatal(l, err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if l, err := s.Acquire(ctx, "new", c, "x"); err != nil || l.Held {
			b.Fatal(l, err)
		}
	}
}
