package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/internal/rulesettest"
)

var plans = rulesettest.Plans

var tenantPlans = map[string]string{"a": "free", "b": "pro", "c": "gold"}

// planLimit chooses the limit of the call's tenant (x-tenant) by its plan.
func planLimit(ctx context.Context, _ string, _ any) (redlimit.Limit, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	plan := tenantPlans[strings.Join(md.Get("x-tenant"), "")]
	l, ok := plans[plan]
	if !ok {
		return redlimit.Limit{}, fmt.Errorf("unknown plan %q", plan)
	}
	return l, nil
}

// serviceCost is the cost a health check states in its service name, as
// "cost=N"; the size of the message otherwise, and 1 for a stream.
func serviceCost(_ context.Context, _ string, req any) (int64, error) {
	m, ok := req.(*healthpb.HealthCheckRequest)
	if !ok {
		return 1, nil
	}
	if n, ok := strings.CutPrefix(m.GetService(), "cost="); ok {
		return strconv.ParseInt(n, 10, 64)
	}
	return int64(max(1, proto.Size(m))), nil
}

func tierRules() []grpclimit.Rule {
	return []grpclimit.Rule{{Name: "plan", Key: grpclimit.Metadata("x-tenant"), LimitFunc: planLimit, CostFunc: serviceCost}}
}

// check calls Check as tenant with service, and returns its code and the
// ratelimit metadata.
func check(ctx context.Context, c healthpb.HealthClient, tenant, service string) (codes.Code, string, error) {
	var hdr metadata.MD
	ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&hdr))
	return status.Code(err), strings.Join(hdr.Get("ratelimit"), ","), err
}

// TestPerRequestLimitAndCost steps through calls whose limit and cost their
// tenant and message choose, on a real server. Bad input fails with
// InvalidArgument and consumes nothing; a cost above the limit never passes.
func TestPerRequestLimitAndCost(t *testing.T) {
	t.Parallel()
	t0 := time.Now().Truncate(time.Minute)
	for _, st := range testStores(t, func() time.Time { return t0 }) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			c, h := serve(t, mustNew(t, st.lim, grpclimit.Options{Logger: log}, tierRules()...))
			ctx := ctxTimeout(t)
			for i, s := range []struct {
				tenant, service string
				code            codes.Code
				rateLimit       string
				retry           bool // a RetryInfo detail
			}{
				{"a", "cost=40", codes.NotFound, `"plan";r=60;t=120`, false}, // served: health knows no such service
				{"a", "", codes.OK, `"plan";r=59;t=120`, false},              // an empty message costs 1
				{"b", "cost=400", codes.NotFound, `"plan";r=9600;t=120`, false},
				{"a", "cost=0", codes.InvalidArgument, "", false},
				{"a", "cost=-1", codes.InvalidArgument, "", false},
				{"a", "cost=9223372036854775807", codes.InvalidArgument, "", false},
				{"a", "cost=x", codes.InvalidArgument, "", false},
				{"c", "cost=1", codes.InvalidArgument, "", false},
				{"a", "cost=101", codes.ResourceExhausted, `"plan";r=59`, false},
				{"a", "cost=60", codes.ResourceExhausted, `"plan";r=59;t=62`, true},
				{"a", "cost=59", codes.NotFound, `"plan";r=0;t=120`, false},
			} {
				code, rl, err := check(ctx, c, s.tenant, s.service)
				_, retry := grpclimit.RetryDelay(err)
				if code != s.code || rl != s.rateLimit || retry != s.retry {
					t.Errorf("step %d: tenant %q service %q: %v %q retry %v, want %v %q %v (%v)", i, s.tenant, s.service, code, rl, retry, s.code, s.rateLimit, s.retry, err)
				}
			}
			if checks, _ := h.counts(); checks != 4 {
				t.Errorf("%d checks served, want 4", checks)
			}
			// A stream is decided when it opens, with no message: cost 1.
			wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "x-tenant", "b"))
			defer cancel()
			stream, err := c.Watch(wctx, &healthpb.HealthCheckRequest{Service: "cost=9999"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			hdr, err := stream.Header()
			if got := strings.Join(hdr.Get("ratelimit"), ","); err != nil || got != `"plan";r=9599;t=120` {
				t.Errorf("stream: ratelimit %q (%v), want r=9599", got, err)
			}
		})
	}
}

// TestTiersExactConcurrent calls, from many goroutines through four
// interceptors on one store (four Redis clients), more than each tenant's
// plan allows, with bad calls mixed in: the free tenant is admitted exactly
// 100 calls, the pro tenant exactly the calls whose costs fit 10,000.
func TestTiersExactConcurrent(t *testing.T) {
	t.Parallel()
	s := rulesettest.NewStores(t, "grpclimit", fixedNow())
	lims := map[string][]redlimit.Limiter{"memory": {s.Memory, s.Memory, s.Memory, s.Memory}}
	for _, rs := range s.RedisClients(t, 4) {
		lims["redis"] = append(lims["redis"], rs)
	}
	for name, ls := range lims {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			var clients []healthpb.HealthClient
			for _, lim := range ls {
				c, _ := serve(t, mustNew(t, lim, grpclimit.Options{Logger: log}, tierRules()...))
				clients = append(clients, c)
			}
			const (
				freeSent, proSent, proCost, badSent, workers = 120, 290, 37, 20, 8
			)
			type job struct{ tenant, service string }
			var jobs []job
			for range freeSent {
				jobs = append(jobs, job{"a", "cost=1"})
			}
			for range proSent {
				jobs = append(jobs, job{"b", "cost=" + strconv.Itoa(proCost)})
			}
			for i := range badSent {
				jobs = append(jobs, []job{{"a", "cost=0"}, {"c", "cost=1"}, {"b", "cost=-2"}, {"b", "cost=99999999999999"}}[i%4])
			}
			rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a busy host is slow
			defer cancel()
			var mu sync.Mutex
			counts := map[string]map[codes.Code]int{}
			var wg sync.WaitGroup
			next := make(chan job)
			for w := range workers {
				wg.Go(func() {
					for j := range next {
						code, _, _ := check(ctx, clients[w%len(clients)], j.tenant, j.service)
						mu.Lock()
						k := j.tenant + "/" + j.service
						if counts[k] == nil {
							counts[k] = map[codes.Code]int{}
						}
						counts[k][code]++
						mu.Unlock()
					}
				})
			}
			for _, j := range jobs {
				next <- j
			}
			close(next)
			wg.Wait()
			// Admitted calls reach the health service, which answers NotFound.
			if got := counts["a/cost=1"]; got[codes.NotFound] != 100 || got[codes.ResourceExhausted] != freeSent-100 {
				t.Errorf("free tenant: %v, want 100 admitted", got)
			}
			proOK := 10_000 / proCost
			if got := counts["b/cost="+strconv.Itoa(proCost)]; got[codes.NotFound] != proOK || got[codes.ResourceExhausted] != proSent-proOK {
				t.Errorf("pro tenant: %v, want %d admitted", got, proOK)
			}
			bad := 0
			for k, m := range counts {
				if k != "a/cost=1" && k != "b/cost="+strconv.Itoa(proCost) {
					bad += m[codes.InvalidArgument]
					if len(m) != 1 {
						t.Errorf("bad call %s: %v, want InvalidArgument only", k, m)
					}
				}
			}
			if bad != badSent {
				t.Errorf("%d bad calls refused, want %d", bad, badSent)
			}
		})
	}
}

// TestNewPerRequestRules checks what New refuses of the new fields.
func TestNewPerRequestRules(t *testing.T) {
	t.Parallel()
	lim := testStores(t, nil)[0].lim
	key := grpclimit.Static("k")
	for _, r := range []grpclimit.Rule{
		{Name: "a", Key: key, Limit: redlimit.PerSecond(1), LimitFunc: planLimit},
		{Name: "a", Key: key, Limit: redlimit.PerSecond(1), Cost: 1, CostFunc: serviceCost},
		{Name: "a", Key: key, LimitFunc: planLimit, Cost: -1},
	} {
		if _, err := grpclimit.New(lim, grpclimit.Options{}, r); !errors.Is(err, grpclimit.ErrInvalidRule) {
			t.Errorf("%+v: err %v, want ErrInvalidRule", r, err)
		}
	}
}
