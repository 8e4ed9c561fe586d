package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// migrateSlot moves slot from src to dst as redis-cli --cluster reshard
// does (IMPORTING on dst, MIGRATING on src, the keys, then the new owner
// on dst, src and every other master), the keys of one hash tag per
// MIGRATE, or every key at once when whole, with pause between MIGRATEs.
// It returns the number of keys moved. Unlike moveSlot, it may run in a
// goroutine of its own.
func migrateSlot(cl *redistest.Cluster, slot int, src, dst *redistest.Server, whole bool, pause time.Duration) (int, error) {
	do := func(srv *redistest.Server, args ...string) (string, error) {
		out, err := srv.Do(args...)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", srv.Addr(), strings.Join(args, " "), err)
		}
		return out, nil
	}
	srcID, err := do(src, "CLUSTER", "MYID")
	if err != nil {
		return 0, err
	}
	dstID, err := do(dst, "CLUSTER", "MYID")
	if err != nil {
		return 0, err
	}
	sl := strconv.Itoa(slot)
	if _, err := do(dst, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID); err != nil {
		return 0, err
	}
	if _, err := do(src, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID); err != nil {
		return 0, err
	}
	moved := 0
	for {
		out, err := do(src, "CLUSTER", "GETKEYSINSLOT", sl, "1000")
		if err != nil {
			return moved, err
		}
		keys := strings.Fields(out)
		if len(keys) == 0 {
			break
		}
		_, rest, _ := strings.Cut(keys[0], "{")
		tag, _, _ := strings.Cut(rest, "}")
		args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port()), "", "0", "5000", "KEYS"}
		for _, k := range keys {
			if whole || strings.Contains(k, "{"+tag+"}") {
				args = append(args, k)
				moved++
			}
		}
		if _, err := do(src, args...); err != nil {
			return moved, err
		}
		time.Sleep(pause)
	}
	for _, m := range append([]*redistest.Server{dst, src}, cl.Masters()...) {
		if _, err := do(m, "CLUSTER", "SETSLOT", sl, "NODE", dstID); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// TestSlotMovesUnderTightLimits moves slots holding live keys between
// masters while 32 goroutines decide on them, and on keys of slots that
// stay, under limits far below the load (most decisions denied), so that
// a decision applied twice, lost, or decided on a stale copy of a key
// would show: two slots of one master move at once to the two others,
// one key group at a time for one and in one MIGRATE for the other, then
// the first moves back. New identifiers keep coming into play throughout
// (a window over each slot's identifiers slides), so keys are also
// created while their slot is importing. Limits: a sliding log of 6 per
// hour and a fixed window of 9 per MaxPeriod (no window ends during the
// test); decisions: AllowN on either, and AllowAll on both, cost 1 or 2.
//
// Checked: no identifier is admitted more than its limit; every key's
// count in Redis at the end (a Peek of cost Max+1, which is denied and
// tells what is left) equals what the callers were told was admitted; and
// the only errors are Redis's refusals before running (TRYAGAIN, ASK,
// MOVED, CLUSTERDOWN), counted. REDLIMIT_SLOTMOVE_ROUNDS repeats the run.
func TestSlotMovesUnderTightLimits(t *testing.T) {
	const (
		workers = 32
		perSlot = 40 // identifiers per slot
		span    = 4  // identifiers of a slot in play at once
		phase   = 40 * time.Millisecond
	)
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("REDLIMIT_SLOTMOVE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	cl := redistest.StartCluster(t, redistest.ClusterOptions{ReplicasPerMaster: -1})
	sl := redlimit.Per(6, time.Hour).SlidingLog()
	fw := redlimit.Per(9, redlimit.MaxPeriod).FixedWindow()
	limits := []redlimit.Limit{sl, fw}
	for round := range rounds {
		for i, goRedis := range []bool{false, true} {
			t.Run(fmt.Sprintf("round=%d/goredis=%v", round, goRedis), func(t *testing.T) {
				s := clusterStore(t, cl, goRedis, redisstore.WithPrefix(prefix(t)))
				ctx := context.Background()
				masters := cl.Masters()
				if len(masters) < 3 {
					t.Fatalf("%d masters, want 3", len(masters))
				}
				src, d1, d2 := masters[(i+round)%3], masters[(i+round+1)%3], masters[(i+round+2)%3]
				// Two slots of src, and identifiers of slots that stay.
				var slots []int
				for try := 0; len(slots) < 2; try++ {
					k := s.KeyOf("probe"+strconv.Itoa(try), sl)
					if m, err := cl.MasterFor(k); err == nil && m == src && (len(slots) == 0 || redisstore.KeySlot(k) != slots[0]) {
						slots = append(slots, redisstore.KeySlot(k))
					}
				}
				groups := [][]string{slotIDs(s, slots[0], perSlot), slotIDs(s, slots[1], perSlot)}
				var others []string
				for j := 0; len(others) < perSlot; j++ {
					id := "o" + strconv.Itoa(j)
					if k := redisstore.KeySlot(s.KeyOf(id, sl)); k != slots[0] && k != slots[1] {
						others = append(others, id)
					}
				}
				groups = append(groups, others)
				s.NodeOf(ctx, slots[0])

				var (
					mu        sync.Mutex
					admitted  = map[string]int64{} // id + " " + limit
					transient = map[string]int{}   // by Redis reply word
					calls     atomic.Int64
					denied    atomic.Int64
					stop      atomic.Bool
					wg        sync.WaitGroup
				)
				start := time.Now()
				for w := range workers {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(w), uint64(round)+7))
						mine := map[string]int64{}
						tr := map[string]int{}
						defer func() {
							mu.Lock()
							for k, v := range mine {
								admitted[k] += v
							}
							for k, v := range tr {
								transient[k] += v
							}
							mu.Unlock()
						}()
						fail := func(what string, err error) bool {
							msg := err.Error()
							for _, word := range []string{"TRYAGAIN", "ASK", "MOVED", "CLUSTERDOWN"} {
								if strings.Contains(msg, word) {
									tr[word]++
									return false
								}
							}
							t.Errorf("%s: %v", what, err)
							return true
						}
						for !stop.Load() {
							g := groups[rng.IntN(len(groups))]
							p := int(time.Since(start) / phase)
							id := g[(p+rng.IntN(span))%len(g)]
							cost := 1 + rng.Int64N(2)
							cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
							calls.Add(1)
							if rng.IntN(3) != 0 {
								l := limits[rng.IntN(len(limits))]
								r, err := s.AllowN(cctx, id, l, cost)
								cancel()
								if err != nil {
									if fail(fmt.Sprintf("AllowN(%s, %s)", id, l), err) {
										return
									}
									continue
								}
								if r.Allowed {
									mine[id+" "+l.String()] += cost
								} else {
									denied.Add(1)
								}
							} else {
								d, err := s.AllowAll(cctx, []redlimit.Request{{Key: id, Limit: fw, Cost: cost}, {Key: id, Limit: sl, Cost: cost}})
								cancel()
								if err != nil {
									if fail(fmt.Sprintf("AllowAll(%s)", id), err) {
										return
									}
									continue
								}
								if d.Allowed {
									mine[id+" "+fw.String()] += cost
									mine[id+" "+sl.String()] += cost
								} else {
									denied.Add(1)
								}
							}
						}
					})
				}
				time.Sleep(200 * time.Millisecond)
				var mwg sync.WaitGroup
				moves := []struct {
					slot     int
					from, to *redistest.Server
					whole    bool
				}{{slots[0], src, d1, false}, {slots[1], src, d2, true}}
				for _, m := range moves {
					mwg.Go(func() {
						n, err := migrateSlot(cl, m.slot, m.from, m.to, m.whole, 15*time.Millisecond)
						if err != nil {
							t.Errorf("moving slot %d: %v", m.slot, err)
						}
						t.Logf("moved slot %d (%d keys, whole=%v) from %s to %s", m.slot, n, m.whole, m.from.Addr(), m.to.Addr())
					})
				}
				mwg.Wait()
				time.Sleep(150 * time.Millisecond)
				n, err := migrateSlot(cl, slots[0], d1, src, false, 15*time.Millisecond)
				if err != nil {
					t.Errorf("moving slot %d back: %v", slots[0], err)
				}
				t.Logf("moved slot %d (%d keys) back from %s to %s", slots[0], n, d1.Addr(), src.Addr())
				time.Sleep(300 * time.Millisecond)
				stop.Store(true)
				wg.Wait()
				elapsed := time.Since(start)

				for j, want := range []*redistest.Server{src, d2} {
					if m, err := cl.MasterFor(s.KeyOf(groups[j][0], sl)); err != nil || m != want {
						t.Fatalf("after the moves, slot %d is on %v (%v), want %s", slots[j], m, err, want.Addr())
					}
				}
				var keys, full, used int64
				for _, g := range groups {
					for _, id := range g {
						for _, l := range limits {
							got := admitted[id+" "+l.String()]
							if got > l.Max() {
								t.Errorf("%s %s: %d admitted, over the limit", id, l, got)
							}
							r, err := s.Peek(ctx, id, l, l.Max()+1)
							if err != nil {
								t.Fatal(err)
							}
							if r.Allowed {
								t.Fatalf("%s %s: a Peek of %d allowed", id, l, l.Max()+1)
							}
							if count := l.Max() - r.Remaining; count != got {
								t.Errorf("%s %s: Redis counts %d, the callers were told of %d admitted", id, l, count, got)
							}
							if got > 0 {
								keys++
								used += got
							}
							if got == l.Max() || got == l.Max()-1 {
								full++
							}
						}
					}
				}
				t.Logf("%d decisions in %v (%d denied), %d units admitted on %d keys (%d full); transient errors %v; %d batches of a node went again slot by slot",
					calls.Load(), elapsed.Round(time.Millisecond), denied.Load(), used, keys, full, transient, s.NodeFallbacks())
				if s.NodeFallbacks() == 0 {
					t.Errorf("no batch of a node met a moving slot: the test did not test it")
				}
			})
		}
	}
}
