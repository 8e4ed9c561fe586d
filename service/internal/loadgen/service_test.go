package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/redlimit/redlimit/service/internal/loadgen"
)

// countingRLS is a tiny rate limit service: each descriptor value may take
// limit hits in all, after which it is OVER_LIMIT; with a limit of 0 it
// answers UNKNOWN. It refuses requests without the expected domain and
// descriptor key.
type countingRLS struct {
	pb.UnimplementedRateLimitServiceServer
	domain, descKey string
	limit           uint64

	mu   sync.Mutex
	hits map[string]uint64
}

func newCountingRLS(domain, descKey string, limit uint64) *countingRLS {
	return &countingRLS{domain: domain, descKey: descKey, limit: limit, hits: map[string]uint64{}}
}

func (s *countingRLS) ShouldRateLimit(_ context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if req.Domain != s.domain || len(req.Descriptors) != 1 || len(req.Descriptors[0].Entries) != 1 ||
		req.Descriptors[0].Entries[0].Key != s.descKey {
		return nil, status.Errorf(codes.InvalidArgument, "unexpected request %v", req)
	}
	if s.limit == 0 {
		return &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_UNKNOWN}, nil
	}
	n := uint64(req.HitsAddend)
	if n == 0 {
		n = 1
	}
	value := req.Descriptors[0].Entries[0].Value
	s.mu.Lock()
	h := s.hits[value] + n
	over := h > s.limit
	if !over {
		s.hits[value] = h
	}
	s.mu.Unlock()
	code := pb.RateLimitResponse_OK
	if over {
		code = pb.RateLimitResponse_OVER_LIMIT
	}
	return &pb.RateLimitResponse{OverallCode: code}, nil
}

// serveGRPC serves s on 127.0.0.1:0 until t ends, and returns its address.
func serveGRPC(t *testing.T, s pb.RateLimitServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterRateLimitServiceServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// jsonHandler serves POST /json as the service does: protojson in and
// out, 200 for OK and 429 for OVER_LIMIT, problem details for errors.
func jsonHandler(s pb.RateLimitServiceServer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /json", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"about:blank","title":"Bad Request","status":400,"detail":%q}`, status.Convert(err).Message())
			return
		}
		out, _ := protojson.Marshal(resp)
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
	return mux
}

// serveJSON serves s's /json on an httptest server until t ends, and
// returns the endpoint's URL.
func serveJSON(t *testing.T, s pb.RateLimitServiceServer) string {
	t.Helper()
	srv := httptest.NewServer(jsonHandler(s))
	t.Cleanup(srv.Close)
	return srv.URL + "/json"
}

// checkCounted checks a run against s, a countingRLS of limit 10, with 3
// keys at cost 2: what the service counted is what the run saw allowed, no
// key went above the limit, and once every key had its 5 decisions, the
// rest were denied.
func checkCounted(t *testing.T, res *loadgen.Result, s *countingRLS) {
	t.Helper()
	checkPlausible(t, res)
	if res.Errors != 0 {
		t.Errorf("%d errors, first %s", res.Errors, res.FirstError)
	}
	s.mu.Lock()
	var hits uint64
	for key, h := range s.hits {
		if strings.HasSuffix(key, "preflight") {
			continue
		}
		hits += h
		if h > s.limit {
			t.Errorf("key %s took %d hits, above the limit %d", key, h, s.limit)
		}
	}
	s.mu.Unlock()
	if hits != 2*uint64(res.Allowed) {
		t.Errorf("the service counted %d hits, the run %d allowed at cost 2", hits, res.Allowed)
	}
	// 100 decisions over 3 keys give each key 5 but with a chance below 1e-9.
	if res.Decisions >= 100 && (res.Allowed != 15 || res.Denied == 0) {
		t.Errorf("allowed %d, denied %d: want 15 allowed (3 keys, 10 hits at 2 a decision), the rest denied", res.Allowed, res.Denied)
	}
}

var countedOptions = loadgen.Options{Concurrency: 8, Duration: 300 * time.Millisecond, Keys: 3, Cost: 2}

func TestGRPCTarget(t *testing.T) {
	t.Parallel()
	rls := newCountingRLS("api", "user", 10)
	addr := serveGRPC(t, rls)
	target, err := loadgen.DialGRPC(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	target.Domain, target.DescriptorKey = "api", "user"
	res, err := loadgen.Run(t.Context(), target, countedOptions)
	if err != nil {
		t.Fatal(err)
	}
	checkCounted(t, res, rls)
	if res.Target != "grpc "+addr || res.Algorithm != "" || res.Limit != "" {
		t.Errorf("target %q, algorithm %q, limit %q", res.Target, res.Algorithm, res.Limit)
	}
}

func TestJSONTarget(t *testing.T) {
	t.Parallel()
	rls := newCountingRLS("api", "user", 10)
	url := serveJSON(t, rls)
	target := loadgen.NewJSONTarget(url)
	defer target.Close()
	target.Domain, target.DescriptorKey = "api", "user"
	res, err := loadgen.Run(t.Context(), target, countedOptions)
	if err != nil {
		t.Fatal(err)
	}
	checkCounted(t, res, rls)
	if res.Target != "json "+url {
		t.Errorf("target %q", res.Target)
	}
}

func TestServiceTargetDefaults(t *testing.T) {
	t.Parallel()
	// Without Domain and DescriptorKey, the requests use the defaults, and
	// a cost of 1 leaves hits_addend out (the service counts it as 1).
	s := newCountingRLS(loadgen.DefaultDomain, loadgen.DefaultDescriptorKey, 1)
	g, err := loadgen.DialGRPC(serveGRPC(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	j := &loadgen.JSONTarget{URL: serveJSON(t, s)} // http.DefaultClient
	for _, target := range []loadgen.Target{g, j} {
		key := fmt.Sprintf("%T", target)
		for i, want := range []bool{true, false} {
			allowed, err := target.Decide(t.Context(), key, 1)
			if err != nil || allowed != want {
				t.Errorf("%s, decision %d: %v, %v; want %v", key, i, allowed, err, want)
			}
		}
	}
}

func TestServiceTargetErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	unknown := newCountingRLS("d", "k", 0) // answers UNKNOWN
	g, err := loadgen.DialGRPC(serveGRPC(t, unknown))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Domain, g.DescriptorKey = "d", "k"
	if _, err := g.Decide(ctx, "x", 1); !errors.Is(err, loadgen.ErrUnexpectedAnswer) {
		t.Errorf("grpc, code UNKNOWN: %v, want ErrUnexpectedAnswer", err)
	}
	// A request the service refuses (the wrong domain) is an error.
	g.Domain = "other"
	if _, err := g.Decide(ctx, "x", 1); status.Code(err) != codes.InvalidArgument {
		t.Errorf("grpc, wrong domain: %v, want InvalidArgument", err)
	}
	g.Domain = "d"
	if _, err := g.Decide(ctx, "x", 1<<32); !errors.Is(err, loadgen.ErrInvalidOptions) {
		t.Errorf("grpc, cost 2^32: %v, want ErrInvalidOptions", err)
	}

	j := loadgen.NewJSONTarget(serveJSON(t, unknown))
	defer j.Close()
	j.Domain, j.DescriptorKey = "other", "k"
	_, err = j.Decide(ctx, "x", 1)
	if !errors.Is(err, loadgen.ErrUnexpectedAnswer) || !strings.Contains(err.Error(), "400 Bad Request: unexpected request") {
		t.Errorf("json, wrong domain: %v, want ErrUnexpectedAnswer with the status and the problem's detail", err)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer plain.Close()
	j.URL = plain.URL
	_, err = j.Decide(ctx, "x", 1)
	if !errors.Is(err, loadgen.ErrUnexpectedAnswer) || !strings.Contains(err.Error(), "503 Service Unavailable: down for maintenance") {
		t.Errorf("json, 503: %v", err)
	}

	// Through Run, failures are counted with the first one's message.
	res, err := loadgen.Run(ctx, j, loadgen.Options{Concurrency: 2, Duration: 50 * time.Millisecond, Keys: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Errors != res.Decisions || !strings.Contains(res.FirstError, "down for maintenance") {
		t.Errorf("decisions %d, errors %d, first %q", res.Decisions, res.Errors, res.FirstError)
	}
}
