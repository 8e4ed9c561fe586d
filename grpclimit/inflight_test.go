package grpclimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
)

// inFlightTTL is the TTL of TestInFlight's leases. Renewals come every
// third of it: they hold with ticks up to 1.3s late (600ms was seen under
// -race on a busy machine).
const inFlightTTL = 2 * time.Second

// slowHealth counts the handlers running at once; Check sleeps past the
// lease's TTL, Watch runs until its client goes.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
	in, most atomic.Int64
}

func (h *slowHealth) enter() {
	x := h.in.Add(1)
	for m := h.most.Load(); x > m && !h.most.CompareAndSwap(m, x); m = h.most.Load() {
	}
}

func (h *slowHealth) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.enter()
	defer h.in.Add(-1)
	time.Sleep(inFlightTTL + 100*time.Millisecond)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *slowHealth) Watch(r *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	h.enter()
	defer h.in.Add(-1)
	if err := s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// serveSlow starts servers with interceptors made by mk, sharing h, and
// returns a client of each.
func serveSlow(t *testing.T, h *slowHealth, n int, mk func() *grpclimit.Interceptor) []healthpb.HealthClient {
	var clients []healthpb.HealthClient
	for range n {
		clients = append(clients, serveWith(t, mk(), h))
	}
	return clients
}

// TestInFlight: unary calls through 4 servers × 16 clients never run more
// than N handlers at once, past the TTL; streams hold their slot until
// they end.
func TestInFlight(t *testing.T) {
	for _, st := range testStores(t, nil) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			const n = 3
			c := redlimit.InFlight(n, inFlightTTL) // Check sleeps past it
			h := &slowHealth{}
			clients := serveSlow(t, h, 4, func() *grpclimit.Interceptor {
				return mustNew(t, st.lim, grpclimit.Options{}, grpclimit.Rule{Name: "jobs", InFlight: c, Key: grpclimit.Static("t1")})
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var served, denied atomic.Int64
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 2 {
						_, err := clients[i%4].Check(ctx, &healthpb.HealthCheckRequest{})
						switch status.Code(err) {
						case codes.OK:
							served.Add(1)
						case codes.ResourceExhausted:
							denied.Add(1)
						default:
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			if h.most.Load() > n {
				t.Fatalf("%d handlers at once, limit %d", h.most.Load(), n)
			}
			if served.Load() == 0 || denied.Load() == 0 {
				t.Fatalf("served %d, denied %d", served.Load(), denied.Load())
			}

			// Streams: n open hold every slot, past the TTL.
			var cancels []context.CancelFunc
			for i := range n {
				sctx, cancel := context.WithCancel(ctx)
				cancels = append(cancels, cancel)
				s, err := clients[i%4].Watch(sctx, &healthpb.HealthCheckRequest{})
				if err == nil {
					_, err = s.Recv()
				}
				if err != nil {
					t.Fatalf("stream %d: %v", i, err)
				}
			}
			time.Sleep(2 * c.TTL)
			if _, err := clients[3].Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("with every slot held by streams: %v", err)
			}
			for _, cancel := range cancels {
				cancel()
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, err := clients[0].Check(ctx, &healthpb.HealthCheckRequest{})
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the streams ended: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
