package micros

import (
	"math"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	cases := []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(-1, 0), 0},
		{time.UnixMicro(math.MinInt64), 0},
		{time.UnixMicro(1_700_000_000_123_456), 1_700_000_000_123_456},
		{time.UnixMicro(Max), Max},
		{time.UnixMicro(Max + 1), Max},
		{time.UnixMicro(math.MaxInt64), Max},
		{time.Unix(1<<62, 0), Max}, // beyond what UnixMicro holds
	}
	for _, c := range cases {
		if got := Of(c.at); got != c.want {
			t.Errorf("Of(%v) = %d, want %d", c.at, got, c.want)
		}
	}
}
