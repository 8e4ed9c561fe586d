package backoff_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/backoff"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// admission is the span of real time within which a store admitted a
// request: between the call to the limiter and its answer.
type admission struct{ from, to time.Time }

// recorder is a Limiter that records when its AllowAll admitted.
type recorder struct {
	redlimit.Limiter
	mu   sync.Mutex
	seen []admission
}

func (r *recorder) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	from := time.Now()
	d, err := r.Limiter.AllowAll(ctx, reqs)
	if err == nil && d.Allowed {
		to := time.Now()
		r.mu.Lock()
		r.seen = append(r.seen, admission{from, to})
		r.mu.Unlock()
	}
	return d, err
}

// narrowestSpan returns the shortest span of real time that can hold
// count+1 admissions: the store admitted each somewhere within its
// [from, to], so the store's own times of any count+1 admissions are at
// least this far apart, and at most the returned span. It returns the
// largest Duration for fewer admissions.
func narrowestSpan(seen []admission, count int) time.Duration {
	best := time.Duration(1<<63 - 1)
	for i, a := range seen {
		// The set whose earliest start is a's: a, and the count others
		// starting no earlier that end soonest.
		var ends []time.Time
		for j, b := range seen {
			if j != i && !b.from.Before(a.from) {
				ends = append(ends, b.to)
			}
		}
		if len(ends) < count {
			continue
		}
		slices.SortFunc(ends, func(x, y time.Time) int { return x.Compare(y) })
		last := a.to
		if ends[count-1].After(last) {
			last = ends[count-1]
		}
		best = min(best, last.Sub(a.from))
	}
	return best
}

// TestEveryRequestThrough sends more requests at once than a server's limit
// allows, through the back-off Transport: every one gets through in the end,
// and the server never admits more than the limit within any period.
func TestEveryRequestThrough(t *testing.T) {
	t.Parallel()
	limit := redlimit.Per(5, 200*time.Millisecond).SlidingLog()
	const clients, perClient = 5, 3

	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Shared(t).Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rs, err := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("backoff-t%x:", rand.Uint64())))
	if err != nil {
		t.Fatal(err)
	}

	// The subtests mostly sleep: they run at once, outside the -parallel
	// limit, which is the number of CPUs.
	var all sync.WaitGroup
	defer all.Wait()
	for _, store := range []struct {
		name string
		lim  redlimit.Limiter
	}{{"memory", mem}, {"redis", rs}} {
		for _, pace := range []bool{false, true} {
			all.Go(func() {
				t.Run(fmt.Sprintf("%s/Pace=%v", store.name, pace), func(t *testing.T) {
					rec := &recorder{Limiter: store.lim}
					m, err := httplimit.New(rec, httplimit.Options{},
						httplimit.Rule{Name: fmt.Sprintf("all-%v", pace), Limit: limit, Key: httplimit.Static("all")})
					if err != nil {
						t.Fatal(err)
					}
					var served, denied atomic.Int64
					srv := httptest.NewServer(m.Handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						served.Add(1)
						io.WriteString(w, "ok")
					})))
					t.Cleanup(srv.Close)
					counting := roundTripFunc(func(r *http.Request) (*http.Response, error) {
						resp, err := http.DefaultTransport.RoundTrip(r)
						if err == nil && resp.StatusCode == http.StatusTooManyRequests {
							denied.Add(1)
						}
						return resp, err
					})
					client := &http.Client{Transport: &backoff.Transport{
						Base:   counting,
						Policy: backoff.Policy{MaxAttempts: 10, MaxWait: 5 * time.Second},
						Pace:   pace,
					}}

					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					begin := time.Now()
					var wg sync.WaitGroup
					for range clients {
						wg.Go(func() {
							for range perClient {
								req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
								resp, err := client.Do(req)
								if err != nil {
									t.Error(err)
									return
								}
								resp.Body.Close()
								if resp.StatusCode != http.StatusOK {
									t.Errorf("status %d", resp.StatusCode)
								}
							}
						})
					}
					wg.Wait()
					if got := served.Load(); got != clients*perClient {
						t.Errorf("served %d requests, want %d", got, clients*perClient)
					}
					rec.mu.Lock()
					seen := append([]admission(nil), rec.seen...)
					rec.mu.Unlock()
					if span := narrowestSpan(seen, int(limit.Count)); span < limit.Period {
						t.Errorf("%d admissions within %v, limit %s", limit.Count+1, span, limit)
					}
					t.Logf("%d requests in %v, %d denials on the way", served.Load(), time.Since(begin).Round(time.Millisecond), denied.Load())
				})
			})
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNarrowestSpan(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	at := func(ms ...int) []admission {
		var out []admission
		for _, m := range ms {
			tm := t0.Add(time.Duration(m) * time.Millisecond)
			out = append(out, admission{tm, tm.Add(time.Millisecond)})
		}
		return out
	}
	if got := narrowestSpan(at(0, 10, 20, 30, 40, 250, 260), 5); got != 251*time.Millisecond {
		t.Errorf("span %v, want 251ms", got)
	}
	if got := narrowestSpan(at(0, 10, 20, 30, 40, 50), 5); got != 51*time.Millisecond {
		t.Errorf("span %v, want 51ms", got)
	}
	if got := narrowestSpan(at(0, 10), 5); got != 1<<63-1 {
		t.Errorf("span %v for too few", got)
	}
}
