package redisstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// waitLimit is the limit the Wait tests share: 40 a second, one at a
// time, so 64 waiters take 1.6 s.
var waitLimit = redlimit.Per(40, time.Second).TokenBucket(1)

// Each waiter wakes no earlier than its instant of its turn, less waitSkew
// (Redis TIME and Go read one clock, in µs), and nine in ten wake within
// waitLate after it: timers and goroutines run late on a busy machine.
const (
	waitSkew = time.Millisecond
	waitLate = 250 * time.Millisecond
)

// admission is one waiter's: the TAT its turn wrote, and when
// Wait returned.
type admission struct {
	tat  int64
	woke time.Time
}

// recorder is a Queuer that records each turn's TAT.
type recorder struct {
	*redisstore.Store
	tat int64
}

func (r *recorder) Queue(ctx context.Context, key string, l redlimit.Limit, n int64, maxWait time.Duration) (redlimit.Turn, error) {
	q, err := r.Store.Queue(ctx, key, l, n, maxWait)
	r.tat = q.TAT
	return q, err
}

// waitAll runs waiters goroutines, each calling Wait on its own recorder
// of s, and returns their admissions.
func waitAll(t testing.TB, s *redisstore.Store, key string, waiters int) []admission {
	var mu sync.Mutex
	var out []admission
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &recorder{Store: s}
			res, err := redlimit.Wait(context.Background(), rec, key, waitLimit, 1, 10*time.Second)
			if err != nil || !res.Allowed {
				t.Errorf("Wait: %+v, %v", res, err)
				return
			}
			mu.Lock()
			out = append(out, admission{rec.tat, time.Now()})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// checkSpacing checks what the waiters of one limit were admitted: their
// instant of its turns never closer than the emission interval (so never
// more than Count in a period), each waiter woken at or after its own.
func checkSpacing(t *testing.T, as []admission, want int) {
	t.Helper()
	if len(as) != want {
		t.Fatalf("%d admitted, want %d", len(as), want)
	}
	ei := waitLimit.EmissionInterval()
	tau := waitLimit.Burst * ei
	slices.SortFunc(as, func(a, b admission) int { return int(a.tat - b.tat) })
	var late []time.Duration
	for i, a := range as {
		at := time.UnixMicro(a.tat - tau)
		if i > 0 && a.tat-as[i-1].tat < ei {
			t.Errorf("turns %d and %d %dµs apart, want at least %dµs", i-1, i, a.tat-as[i-1].tat, ei)
		}
		if a.woke.Before(at.Add(-waitSkew)) {
			t.Errorf("admission %d woke %s before its instant", i, at.Sub(a.woke))
		}
		late = append(late, a.woke.Sub(at))
	}
	// Per period, by instant of its turn: never above the count.
	for i := range as {
		j := i
		for j < len(as) && as[j].tat-as[i].tat < waitLimit.Period.Microseconds() {
			j++
		}
		if j-i > int(waitLimit.Count) {
			t.Errorf("%d admitted within a period from admission %d, limit %d", j-i, i, waitLimit.Count)
		}
	}
	slices.Sort(late)
	p50, p90 := late[len(late)/2], late[len(late)*9/10]
	t.Logf("lateness after the instant of its turn: median %s, p90 %s, max %s", p50, p90, late[len(late)-1])
	if p90 > waitLate {
		t.Errorf("nine in ten woke within %s of their instant, want %s", p90, waitLate)
	}
}

// TestWaitSpacing: 4 stores on clients of their own × 16 waiters on one
// limit are admitted at exactly the rate.
func TestWaitSpacing(t *testing.T) {
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			p := prefix(t)
			var mu sync.Mutex
			var all []admission
			var wg sync.WaitGroup
			for i := range 4 {
				dd := d
				dd.goRedis = i%2 == 1
				s := dd.store(t, redisstore.WithPrefix(p))
				wg.Add(1)
				go func() {
					defer wg.Done()
					as := waitAll(t, s, "crawler", 16)
					mu.Lock()
					all = append(all, as...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			checkSpacing(t, all, 64)
		})
	}
}

// TestWaitProcesses: 4 OS processes (this test binary, run again) × 16
// waiters on one limit are admitted at exactly the rate.
func TestWaitProcesses(t *testing.T) {
	if env := os.Getenv("REDLIMIT_WAIT_CHILD"); env != "" {
		addr, p, _ := strings.Cut(env, " ")
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := redisstore.New(c, redisstore.WithPrefix(p))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range waitAll(t, s, "crawler", 16) {
			fmt.Printf("admitted %d %d\n", a.tat, a.woke.UnixMicro())
		}
		return
	}
	addr := redistest.Shared(t).Addr()
	p := prefix(t)
	cmds := make([]*exec.Cmd, 4)
	outs := make([]*bytes.Buffer, 4)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestWaitProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "REDLIMIT_WAIT_CHILD="+addr+" "+p)
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var all []admission
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			var a admission
			var woke int64
			if _, err := fmt.Sscanf(sc.Text(), "admitted %d %d", &a.tat, &woke); err == nil {
				a.woke = time.UnixMicro(woke)
				all = append(all, a)
			}
		}
	}
	checkSpacing(t, all, 64)
}

// TestWaitCancel: 4 stores × 16 queue on one limit; the latest 8 give
// their places back, latest first, and a request queued then takes the
// first place given back. A place in the middle is not given back: the
// later turns keep their instants.
func TestWaitCancel(t *testing.T) {
	d := deployments[0]
	p := prefix(t)
	ctx := context.Background()
	stores := make([]*redisstore.Store, 4)
	for i := range stores {
		stores[i] = d.store(t, redisstore.WithPrefix(p))
	}
	var mu sync.Mutex
	var rs []redlimit.Turn
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.Queue(ctx, "vendor", waitLimit, 1, 10*time.Second)
				if err != nil || !r.Allowed {
					t.Errorf("Queue: %+v, %v", r, err)
				}
				mu.Lock()
				rs = append(rs, r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(rs, func(a, b redlimit.Turn) int { return int(a.TAT - b.TAT) })
	if back, err := stores[1].Unqueue(ctx, rs[30]); back || err != nil {
		t.Errorf("Unqueue of a place with later ones: %v, %v; want false", back, err)
	}
	for i := 63; i >= 56; i-- {
		if back, err := stores[i%4].Unqueue(ctx, rs[i]); !back || err != nil {
			t.Fatalf("Unqueue of the latest place %d: %v, %v; want true", i, back, err)
		}
	}
	r, err := stores[2].Queue(ctx, "vendor", waitLimit, 1, 10*time.Second)
	if err != nil || r.TAT != rs[56].TAT {
		t.Errorf("queued after the cancellations at TAT %d (%v), want %d", r.TAT, err, rs[56].TAT)
	}
	// Wait whose ctx ends first: its place goes back. The cancel comes
	// halfway to the turn, well after Queue's call has answered.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(r.Delay/2, cancel)
	if _, err := redlimit.Wait(cctx, stores[3], "vendor", waitLimit, 1, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled: %v, want context.Canceled", err)
	}
	r2, err := stores[0].Queue(ctx, "vendor", waitLimit, 1, 10*time.Second)
	if err != nil || r2.TAT != r.TAT+waitLimit.EmissionInterval() {
		t.Errorf("queued after a cancelled Wait at TAT %d (%v), want %d", r2.TAT, err, r.TAT+waitLimit.EmissionInterval())
	}
	// Beyond the maximum wait: refused at once, with its RetryAfter.
	r3, err := stores[1].Queue(ctx, "vendor", waitLimit, 1, 100*time.Millisecond)
	if err != nil || r3.Allowed || r3.RetryAfter <= 100*time.Millisecond || r3.TAT != 0 {
		t.Errorf("Queue beyond the maximum wait: %+v, %v; want a denial with RetryAfter over 100ms", r3, err)
	}
}
