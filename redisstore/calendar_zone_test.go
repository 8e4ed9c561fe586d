package redisstore_test

import (
	"context"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestCalendarUTCIsOneState: a calendar's zone "" is UTC, so "" and "UTC"
// name one calendar and one state. An operator who writes time_zone: UTC
// where the rule had none (redlimit check shows "UTC") changes nothing: a
// key's month used up under one is used up under the other, on every
// store. Another zone is another state (documented: Berlin to Tokyo
// starts afresh).
func TestCalendarUTCIsOneState(t *testing.T) {
	ctx := context.Background()
	plain := redlimit.PerCalendar(3, redlimit.Month, "")
	named := redlimit.PerCalendar(3, redlimit.Month, "UTC")
	if plain.StateID("k") != named.StateID("k") {
		t.Errorf("StateID: zone %q and %q are two states", plain.StateID("k").Calendar.Zone, named.StateID("k").Calendar.Zone)
	}
	clock := redlimittest.NewClock(redlimittest.T0)
	mem, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	stores := map[string]redlimit.Limiter{"memory": mem}
	for _, d := range []deployment{deployments[0], deployments[2]} {
		stores[d.name] = d.store(t, redisstore.WithClock(clock.Now), redisstore.WithPrefix(prefix(t)))
	}
	for name, s := range stores {
		for i, l := range []redlimit.Limit{plain, named} {
			key := []string{"used plain", "used named"}[i]
			if r, err := s.AllowN(ctx, key, l, 3); err != nil || !r.Allowed {
				t.Fatalf("%s: %+v, %v", name, r, err)
			}
			other := []redlimit.Limit{named, plain}[i]
			if r, err := s.AllowN(ctx, key, other, 1); err != nil || r.Allowed {
				t.Errorf("%s: %s used up, then %q: %+v, %v; want denied", name, l.Calendar, other.Calendar.Zone, r, err)
			}
		}
	}
}
