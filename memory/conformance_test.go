package memory_test

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

func TestConformance(t *testing.T) {
	redlimittest.Run(t, func(t *testing.T, now func() time.Time) redlimit.Limiter {
		s, err := memory.New(memory.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
