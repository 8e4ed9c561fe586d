package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/model"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
)

// TestLeaseBoundedModel applies random acquires, renews and releases, and
// rate decisions on the same keys, to a memory store with small bounds:
// long keys, slots lowered under held leases, TTLs changed, the clock
// going back a little; RecordLease too. Every lease answer is
// model.Leases', but for a new lease the full store refuses. A refusal is
// a denial counted in Stats.Refused, never an error, and only when the
// leases or the bytes are at their bound. A record (MaxSlots) may go an
// eighth beyond, as a debit does. The bytes never pass that, and come
// back to zero once everything expired and was swept.
func TestLeaseBoundedModel(t *testing.T) {
	const maxLeases, maxBytes = 12, 8 << 10
	const overLeases, overBytes = maxLeases + 1, maxBytes + maxBytes/8 // records
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 4))
	clock := redlimittest.NewClock(redlimittest.T0)
	s := newStore(t, memory.WithMaxKeys(maxLeases), memory.WithMaxBytes(maxBytes), memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	ctx := context.Background()
	limits := []redlimit.Concurrency{
		redlimit.InFlight(1, redlimit.MinLeaseTTL),
		redlimit.InFlight(2, time.Second),
		redlimit.InFlight(3, 3*time.Second),
		redlimit.InFlight(redlimit.MaxSlots, redlimit.MaxLeaseTTL),
	}
	keys := []string{"a", "b", strings.Repeat("c", 1000), strings.Repeat("d", 3000), "e"}
	ids := []string{"x", "y", "z", strings.Repeat("i", redlimit.MaxLeaseIDLen)}
	rate := redlimit.Per(2, time.Second).FixedWindow()
	lm := model.Leases{}
	live := func() (n int) {
		for _, ls := range lm {
			for _, exp := range ls {
				if exp.After(clock.Now()) {
					n++
				}
			}
		}
		return n
	}
	var refused, held int
	for i := range 3000 {
		switch rng.IntN(10) {
		case 0:
			// A full store may have trimmed every key's expired leases.
			// Sweep does it for sure, so the model knows.
			s.Sweep()
			lm.Trim(clock.Now())
			clock.Advance(-time.Duration(rng.IntN(5_000)) * time.Microsecond)
		case 1, 2, 3:
			clock.Advance(time.Duration(rng.IntN(300_000)) * time.Microsecond)
		}
		c, key, id := limits[rng.IntN(len(limits))], keys[rng.IntN(len(keys))], ids[rng.IntN(len(ids))]
		op := []string{"acquire", "acquire", "acquire", "record", "renew", "release", "allow"}[rng.IntN(7)]
		where := fmt.Sprintf("seed %d, op %d: %s %.8q %+v %.8q", seed, i, op, key, c, id)
		var got redlimit.Lease
		var err error
		before, bytesBefore := s.Stats().Refused, s.Stats().Bytes
		isNew := !lm.Holds(key, id, clock.Now())
		switch op {
		case "allow":
			_, err = s.AllowN(ctx, key, rate, 1)
		case "acquire":
			got, err = s.Acquire(ctx, key, c, id)
		case "record":
			got, err = redlimit.RecordLease(ctx, s, key, c, id)
			op, c.Slots = "acquire", redlimit.MaxSlots // what the model runs
		case "renew":
			got, err = s.Renew(ctx, key, c, id)
		default:
			err = s.Release(ctx, key, c, id)
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if b := s.Stats().Bytes; b > overBytes || isNew && got.Held && c.Slots != redlimit.MaxSlots && b > maxBytes {
			t.Fatalf("%s: %d bytes, bound %d (%d for a record)", where, b, maxBytes, overBytes)
		}
		if op == "allow" {
			continue
		}
		want := lm.Do(op, key, c, id, clock.Now())
		if op == "release" {
			continue
		}
		if op == "acquire" && isNew && want.Held && !got.Held {
			// Refused for want of room: the store was full.
			bl, bb := int64(maxLeases), int64(maxBytes)
			if c.Slots == redlimit.MaxSlots {
				bl, bb = overLeases, overBytes
			}
			full := int64(live()-1) >= bl || bytesBefore+int64(len(key)+len(id))+400 > bb
			if s.Stats().Refused != before+1 || got.RetryAfter < time.Millisecond || !full {
				t.Fatalf("%s: %+v, refused %d, %d leases, %d bytes: not a refusal of a full store", where, got, s.Stats().Refused-before, live()-1, bytesBefore)
			}
			lm.Do("release", key, c, id, clock.Now())
			refused++
			continue
		}
		if got != want {
			t.Fatalf("%s: store %+v, model %+v", where, got, want)
		}
		if got.Held {
			held++
		}
	}
	if refused < 5 || held < 500 {
		t.Errorf("seed %d: %d refused, %d held: the sequence tests little", seed, refused, held)
	}
	clock.Advance(2 * redlimit.MaxLeaseTTL)
	s.Sweep()
	if b := s.Stats().Bytes; b != 0 {
		t.Fatalf("seed %d: all expired and swept, %d bytes held", seed, b)
	}
}
