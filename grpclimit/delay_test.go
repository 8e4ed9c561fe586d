package grpclimit_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

// timedHealth records when its handlers start.
type timedHealth struct {
	healthpb.UnimplementedHealthServer
	mu     sync.Mutex
	starts []time.Time
}

func (h *timedHealth) start() {
	h.mu.Lock()
	h.starts = append(h.starts, time.Now())
	h.mu.Unlock()
}

func (h *timedHealth) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.start()
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *timedHealth) Watch(r *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	h.start()
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// sorted returns the handlers' start instants, earliest first.
func (h *timedHealth) sorted() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := append([]time.Time(nil), h.starts...)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	return s
}

// serveTimed starts a gRPC server per limiter, each with an interceptor
// of rule and sharing h, and returns a client of each.
func serveTimed(t *testing.T, h *timedHealth, rule grpclimit.Rule, lims ...redlimit.Limiter) []healthpb.HealthClient {
	t.Helper()
	var clients []healthpb.HealthClient
	for _, lim := range lims {
		clients = append(clients, serveWith(t, mustNew(t, lim, grpclimit.Options{}, rule), h))
	}
	return clients
}

// delayStores returns, per store, the limiters of two servers sharing one
// limit: the memory store twice, or two Redis clients of their own.
func delayStores(t *testing.T) map[string][]redlimit.Limiter {
	s := rulesettest.NewStores(t, "grpclimit", nil)
	rs := s.RedisClients(t, 2)
	return map[string][]redlimit.Limiter{
		"memory": {s.Memory, s.Memory},
		"redis":  {rs[0], rs[1]},
	}
}

// callOnce makes a unary call (stream false) or opens a stream and reads
// its first message, and returns the status.
func callOnce(ctx context.Context, c healthpb.HealthClient, stream bool) error {
	if !stream {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// TestDelaySpaced: 8 calls at once, unary and streams, through two
// servers, on a bucket of burst 1 at 2/s with a Delay of 5 intervals:
// 6 are admitted, each handler starting an interval after the last (never
// two in one interval), and 2 are refused at once with a RetryInfo.
func TestDelaySpaced(t *testing.T) {
	const interval = 500 * time.Millisecond // more than a busy machine's start lag
	for name, lims := range delayStores(t) {
		t.Run(name, func(t *testing.T) {
			h := &timedHealth{}
			clients := serveTimed(t, h, grpclimit.Rule{
				Name: "delay", Limit: redlimit.Per(2, time.Second).TokenBucket(1), Key: grpclimit.Static("all"), Delay: 5 * interval,
			}, lims...)
			type answer struct {
				code  codes.Code
				took  time.Duration
				retry bool
			}
			var mu sync.Mutex
			var as []answer
			var wg sync.WaitGroup
			start := time.Now()
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := callOnce(ctxTimeout(t), clients[i%2], i%4 >= 2)
					_, retry := grpclimit.RetryDelay(err)
					mu.Lock()
					as = append(as, answer{status.Code(err), time.Since(start), retry})
					mu.Unlock()
				}()
			}
			wg.Wait()
			var ok int
			for _, a := range as {
				switch {
				case a.code == codes.OK:
					ok++
				case a.code != codes.ResourceExhausted || !a.retry:
					t.Errorf("answer %+v: want OK, or ResourceExhausted with a RetryInfo", a)
				case a.took > 2*interval:
					// The first delayed call is admitted after one interval.
					t.Errorf("refused after %s: want at once", a.took)
				}
			}
			if ok != 6 {
				t.Fatalf("answers %+v: want 6 admitted and 2 refused", as)
			}
			starts := h.sorted()
			const slack = 20 * time.Millisecond // the stores' clocks against this one
			for i, s := range starts {
				lo, hi := time.Duration(i)*interval-slack, time.Duration(i)*interval+2*interval
				if d := s.Sub(start); d < lo || d > hi {
					t.Errorf("handler %d started at %s: want %s..%s", i, d, lo, hi)
				}
				if i > 0 && s.Sub(starts[i-1]) < interval-slack {
					t.Errorf("handlers %d and %d started %s apart: want at least %s", i-1, i, s.Sub(starts[i-1]), interval)
				}
			}
		})
	}
}

// takeFirstTurn serves a rule of 1 a second, burst 1, delayed up to 3s,
// through a server per limiter. Its first call takes the burst. It returns the handlers, the clients and when the call began.
func takeFirstTurn(t *testing.T, name string, lims []redlimit.Limiter) (*timedHealth, []healthpb.HealthClient, time.Time) {
	t.Helper()
	h := &timedHealth{}
	clients := serveTimed(t, h, grpclimit.Rule{
		Name: name, Limit: redlimit.Per(1, time.Second).TokenBucket(1), Key: grpclimit.Static("all"), Delay: 3 * time.Second,
	}, lims...)
	start := time.Now()
	if err := callOnce(ctxTimeout(t), clients[0], false); err != nil {
		t.Fatal(err)
	}
	return h, clients, start
}

// TestDelayDeadline: a call whose deadline comes before its turn is
// refused at once, takes no turn, and a later call gets that turn.
func TestDelayDeadline(t *testing.T) {
	for name, lims := range delayStores(t) {
		t.Run(name, func(t *testing.T) {
			_, clients, start := takeFirstTurn(t, "deadline", lims)
			for i, stream := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
				t0 := time.Now()
				err := callOnce(ctx, clients[i], stream)
				cancel()
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("stream %v: %v after %s: want ResourceExhausted at once", stream, err, time.Since(t0))
				}
			}
			if err := callOnce(ctxTimeout(t), clients[1], false); err != nil {
				t.Fatal(err)
			}
			// Its turn was the one the refused calls did not take.
			if d := time.Since(start); d > 1800*time.Millisecond {
				t.Errorf("the next call was served after %s: want about 1s", d)
			}
		})
	}
}

// TestDelayCancelGivesBack: a call cancelled while it waits gives its turn
// back: the next call is admitted at that turn, not one later. Each call
// is cancelled after its turn is queued (a cancel during the store's call
// may lose the reply with the turn taken; see redlimit.Wait). The next
// call starts once the server has given the turn back: a turn queued
// behind it first would keep its place.
func TestDelayCancelGivesBack(t *testing.T) {
	for name, lims := range delayStores(t) {
		t.Run(name, func(t *testing.T) {
			h, clients, start := takeFirstTurn(t, "cancel", lims)
			for i, stream := range []bool{false, true} {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(150*time.Millisecond, cancel)
				if err := callOnce(ctx, clients[i], stream); status.Code(err) != codes.Canceled {
					t.Fatalf("stream %v: %v: want Canceled", stream, err)
				}
				time.Sleep(250 * time.Millisecond) // the server gives the turn back
			}
			if err := callOnce(ctxTimeout(t), clients[1], false); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 1800*time.Millisecond {
				t.Errorf("the next call was served after %s: want about 1s, the turn given back", d)
			}
			if n := len(h.sorted()); n != 2 {
				t.Errorf("%d handlers ran: want 2", n)
			}
		})
	}
}

// TestDelayInvalid: a negative delay, one above redlimit.MaxWait, one on a
// shadow rule and one on an in-flight rule are refused at New.
func TestDelayInvalid(t *testing.T) {
	s := rulesettest.NewStores(t, "grpclimit", nil)
	for _, r := range []grpclimit.Rule{
		{Name: "neg", Limit: redlimit.PerSecond(1), Key: grpclimit.RemoteIP, Delay: -time.Second},
		{Name: "long", Limit: redlimit.PerSecond(1), Key: grpclimit.RemoteIP, Delay: redlimit.MaxWait + time.Second},
		{Name: "shadow", Limit: redlimit.PerSecond(1), Key: grpclimit.RemoteIP, Delay: time.Second, Shadow: true},
		{Name: "inflight", InFlight: redlimit.Concurrency{Slots: 1, TTL: time.Second}, Key: grpclimit.RemoteIP, Delay: time.Second},
	} {
		_, err := grpclimit.New(s.Memory, grpclimit.Options{}, r)
		if !errors.Is(err, grpclimit.ErrInvalidRule) {
			t.Errorf("rule %q: %v: want ErrInvalidRule", r.Name, err)
		}
	}
}
