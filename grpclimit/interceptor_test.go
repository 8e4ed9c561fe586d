package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/backoff"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/ratelimitfield"
)

const checkMethod = "/grpc.health.v1.Health/Check"

func TestUnaryDenied(t *testing.T) {
	t.Parallel()
	peerLimit := redlimit.PerMinute(2).SlidingLog()
	methodLimit := redlimit.PerMinute(100)
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			in := mustNew(t, st.lim, grpclimit.Options{},
				grpclimit.Rule{Name: "peer", Limit: peerLimit, Key: grpclimit.RemoteIP},
				grpclimit.Rule{Name: "method", Limit: methodLimit, Key: grpclimit.Method})
			client, h := serve(t, in)
			ctx := ctxTimeout(t)
			for i := range 3 {
				var md metadata.MD
				_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
				policies, perr := ratelimitfield.ParseRateLimitPolicy(md.Get("ratelimit-policy"))
				limits, lerr := ratelimitfield.ParseRateLimit(md.Get("ratelimit"))
				if perr != nil || lerr != nil || len(policies) != 2 || len(limits) != 1 {
					t.Fatalf("call %d: metadata %v: %v, %v", i+1, md, perr, lerr)
				}
				if p := policies[0]; p.Name != "peer" || p.Quota != 2 || p.Window != time.Minute {
					t.Errorf("call %d: policy %+v", i+1, p)
				}
				left := int64(max(0, 1-i))
				if l := limits[0]; l.Name != "peer" || l.Remaining != left || l.Reset != time.Minute {
					t.Errorf("call %d: ratelimit %+v, want peer with %d left, t=60", i+1, l, left)
				}
				if got := md.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != strconv.FormatInt(left, 10) {
					t.Errorf("call %d: x-ratelimit-remaining %v", i+1, got)
				}
				if got := md.Get("x-ratelimit-limit"); len(got) != 1 || got[0] != "2" {
					t.Errorf("call %d: x-ratelimit-limit %v", i+1, got)
				}
				if i < 2 {
					if err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					continue
				}
				st := status.Convert(err)
				if st.Code() != codes.ResourceExhausted {
					t.Fatalf("call 3: %v, want ResourceExhausted", err)
				}
				d, ok := grpclimit.RetryDelay(err)
				if !ok || d != time.Minute {
					t.Errorf("RetryInfo delay %v, %v; want 1m", d, ok)
				}
				var qf *errdetails.QuotaFailure
				for _, det := range st.Details() {
					if q, ok := det.(*errdetails.QuotaFailure); ok {
						qf = q
					}
				}
				if qf == nil || len(qf.Violations) != 1 || qf.Violations[0].Subject != "peer" {
					t.Errorf("QuotaFailure %v", qf)
				}
				if got := md.Get("retry-after"); len(got) != 1 || got[0] != "60" {
					t.Errorf("retry-after %v", got)
				}
				if !strings.Contains(st.Message(), `"peer"`) {
					t.Errorf("message %q", st.Message())
				}
			}
			if checks, _ := h.counts(); checks != 2 {
				t.Errorf("handler ran %d times, want 2", checks)
			}
			// The denial consumed nothing: the method rule counted 2 calls.
			if res, _ := st.lim.Peek(ctx, "method:"+checkMethod, methodLimit, 1); res.Remaining != 97 {
				t.Errorf("method rule: %d left after one more, want 97", res.Remaining)
			}
		})
	}
}

func TestStreamLimited(t *testing.T) {
	t.Parallel()
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			in := mustNew(t, st.lim, grpclimit.Options{},
				grpclimit.Rule{Name: "streams", Limit: redlimit.PerHour(1), Key: grpclimit.Method})
			client, h := serve(t, in)
			ctx, cancel := context.WithCancel(ctxTimeout(t))
			defer cancel()

			s1, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s1.Recv(); err != nil {
				t.Fatalf("first stream: %v", err)
			}
			md, err := s1.Header()
			if err != nil || len(md.Get("ratelimit")) != 1 {
				t.Errorf("first stream header %v, %v", md, err)
			}
			s2, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s2.Recv()
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("second stream: %v, want ResourceExhausted", err)
			}
			if d, ok := grpclimit.RetryDelay(err); !ok || d <= 0 || d > 2*time.Hour { // a sliding window waits up to two periods
				t.Errorf("RetryInfo %v, %v", d, ok)
			}
			md, _ = s2.Header()
			if l, err := ratelimitfield.ParseRateLimit(md.Get("ratelimit")); err != nil || len(l) != 1 || l[0].Remaining != 0 {
				t.Errorf("second stream ratelimit %v: %v", md.Get("ratelimit"), err)
			}
			// Messages on the admitted stream are not counted.
			if _, watches := h.counts(); watches != 1 {
				t.Errorf("%d streams reached the handler, want 1", watches)
			}
		})
	}
}

// TestClientRetry checks that the client interceptor waits for the
// RetryInfo delay and gets every call through, and that it gives up as its
// policy says.
func TestClientRetry(t *testing.T) {
	t.Parallel()
	limit := redlimit.Per(1, 300*time.Millisecond).SlidingLog()
	for _, st := range testStores(t, nil) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			in := mustNew(t, st.lim, grpclimit.Options{},
				grpclimit.Rule{Name: "slow", Limit: limit, Key: grpclimit.Static("all")})
			client, h := serve(t, in, grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(backoff.Policy{MaxAttempts: 5})))
			ctx := ctxTimeout(t)
			begin := time.Now()
			for i := range 3 {
				if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			// Three calls, one per 300ms: the last no sooner than 600ms on.
			if d := time.Since(begin); d < 600*time.Millisecond || d > 3*time.Second {
				t.Errorf("3 calls took %v", d)
			}
			if checks, _ := h.counts(); checks != 3 {
				t.Errorf("handler ran %d times, want 3", checks)
			}
		})
	}

	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	in := mustNew(t, lim, grpclimit.Options{}, grpclimit.Rule{Name: "hourly", Limit: redlimit.PerHour(1), Key: grpclimit.Static("all")})
	// "At once" is well under MaxWait, with room for a busy machine.
	for _, p := range []backoff.Policy{{MaxAttempts: 1}, {MaxWait: 5 * time.Second}} {
		client, _ := serve(t, in, grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(p)))
		client.Check(ctxTimeout(t), &healthpb.HealthCheckRequest{})
		begin := time.Now()
		_, err := client.Check(ctxTimeout(t), &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.ResourceExhausted || time.Since(begin) > 2500*time.Millisecond {
			t.Errorf("policy %+v: %v after %v, want ResourceExhausted at once", p, err, time.Since(begin))
		}
	}
	// A deadline shorter than the delay gives up at once too, well
	// before the deadline (this call also connects).
	client, _ := serve(t, in, grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(backoff.Policy{MaxWait: 2 * time.Hour})))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	begin := time.Now()
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted || time.Since(begin) > 3*time.Second {
		t.Errorf("short deadline: %v after %v", err, time.Since(begin))
	}
}

func TestPeerIPForwarded(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	trusted, err := grpclimit.PeerIP(clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	untrusted, err := grpclimit.PeerIP(clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grpclimit.PeerIP(clientip.Resolver{IPv6PrefixLen: 200}); err == nil {
		t.Error("PeerIP with a bad prefix length: no error")
	}
	limit := redlimit.PerMinute(10)
	in := mustNew(t, lim, grpclimit.Options{},
		grpclimit.Rule{Name: "trusted", Limit: limit, Key: trusted},
		grpclimit.Rule{Name: "untrusted", Limit: limit, Key: untrusted})
	client, _ := serve(t, in)
	for _, xff := range []string{"198.51.100.7", "203.0.113.9, 198.51.100.7", "2001:db8::1", "2001:db8::2"} {
		ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), "x-forwarded-for", xff)
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for key, used := range map[string]int64{
		"trusted:198.51.100.7":   2,
		"trusted:2001:db8::/64":  2,
		"trusted:203.0.113.9":    0,
		"untrusted:127.0.0.1":    4,
		"untrusted:198.51.100.7": 0,
	} {
		res, err := lim.Peek(context.Background(), key, limit, 1)
		if err != nil || res.Remaining != 10-used-1 {
			t.Errorf("%s: %d left after one more, want %d", key, res.Remaining, 10-used-1)
		}
	}
}

func TestKeysAndErrors(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	boom := errors.New("boom")
	tests := []struct {
		name string
		key  grpclimit.KeyFunc
		md   []string
		code codes.Code
		key2 string // the limiter key expected, if any
	}{
		{name: "metadata", key: grpclimit.Metadata("X-API-Key"), md: []string{"x-api-key", "k1"}, code: codes.OK, key2: "k1"},
		{name: "metadata missing skips", key: grpclimit.Metadata("x-api-key"), code: codes.OK},
		{name: "user missing skips", key: grpclimit.User, code: codes.OK},
		{name: "error", key: func(context.Context, string) (string, error) { return "", boom }, code: codes.InvalidArgument},
		{name: "empty", key: grpclimit.Static(""), code: codes.InvalidArgument},
		{name: "compose", key: grpclimit.Compose(grpclimit.Metadata("a"), grpclimit.Method), md: []string{"a", "x|y"}, code: codes.OK, key2: "x%7Cy|" + checkMethod},
		{name: "or", key: grpclimit.Or(grpclimit.Metadata("a"), grpclimit.Static("anon")), code: codes.OK, key2: "1:anon"},
		{name: "hashed", key: grpclimit.Hashed(grpclimit.Metadata("a")), md: []string{"a", "secret"}, code: codes.OK, key2: "2bb80d537b1da3e38bd30361aa855686"},
	}
	limit := redlimit.PerMinute(5)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := fmt.Sprint("r", i)
			log, _ := newLogger()
			in := mustNew(t, lim, grpclimit.Options{Logger: log}, grpclimit.Rule{Name: name, Limit: limit, Key: tt.key})
			client, _ := serve(t, in)
			ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), tt.md...)
			var md metadata.MD
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
			if status.Code(err) != tt.code {
				t.Fatalf("%v, want %v", err, tt.code)
			}
			if tt.code == codes.InvalidArgument && (strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), name)) {
				t.Errorf("message %q", err)
			}
			if got := len(md.Get("ratelimit")) == 1; got != (tt.key2 != "") {
				t.Errorf("ratelimit metadata %v", md.Get("ratelimit"))
			}
			if tt.key2 != "" {
				if res, _ := lim.Peek(context.Background(), name+":"+tt.key2, limit, 1); res.Remaining != 3 {
					t.Errorf("%s: %d left after one more, want 3", tt.key2, res.Remaining)
				}
			}
		})
	}
}

func TestShadow(t *testing.T) {
	t.Parallel()
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			log, buf := newLogger()
			in := mustNew(t, st.lim, grpclimit.Options{Logger: log},
				grpclimit.Rule{Name: "dry", Limit: redlimit.PerMinute(1), Key: grpclimit.RemoteIP, Shadow: true})
			client, h := serve(t, in)
			for i := range 3 {
				var md metadata.MD
				if _, err := client.Check(ctxTimeout(t), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if len(md.Get("ratelimit")) != 0 || len(md.Get("ratelimit-policy")) != 0 {
					t.Errorf("call %d: a shadow rule in the metadata: %v", i+1, md)
				}
			}
			if checks, _ := h.counts(); checks != 3 {
				t.Errorf("handler ran %d times", checks)
			}
			if n := strings.Count(buf.String(), "shadow rule would deny"); n != 2 {
				t.Errorf("%d shadow denials logged, want 2:\n%s", n, buf)
			}
		})
	}
}

func TestLimiterFailure(t *testing.T) {
	t.Parallel()
	closed, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for _, failClosed := range []bool{false, true} {
		log, buf := newLogger()
		in := mustNew(t, closed, grpclimit.Options{FailClosed: failClosed, Logger: log},
			grpclimit.Rule{Name: "ip", Limit: redlimit.PerSecond(1), Key: grpclimit.RemoteIP})
		client, _ := serve(t, in)
		_, err := client.Check(ctxTimeout(t), &healthpb.HealthCheckRequest{})
		want := codes.OK
		if failClosed {
			want = codes.Unavailable
		}
		if status.Code(err) != want {
			t.Errorf("FailClosed %v: %v, want %v", failClosed, err, want)
		}
		if !strings.Contains(buf.String(), "limiter failed") {
			t.Errorf("FailClosed %v: not logged", failClosed)
		}
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	lim, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	ok := grpclimit.Rule{Name: "ok", Limit: redlimit.PerSecond(1), Key: grpclimit.Method}
	with := func(f func(*grpclimit.Rule)) grpclimit.Rule { r := ok; f(&r); return r }
	tests := []struct {
		name  string
		lim   redlimit.Limiter
		opts  grpclimit.Options
		rules []grpclimit.Rule
		is    error
	}{
		{name: "nil limiter", rules: []grpclimit.Rule{ok}},
		{name: "no rules", lim: lim, is: grpclimit.ErrNoRules},
		{name: "zero limit", lim: lim, rules: []grpclimit.Rule{with(func(r *grpclimit.Rule) { r.Limit = redlimit.Limit{} })}, is: redlimit.ErrUnknownAlgorithm},
		{name: "bad name", lim: lim, rules: []grpclimit.Rule{with(func(r *grpclimit.Rule) { r.Name = "a b" })}, is: grpclimit.ErrInvalidRule},
		{name: "duplicate", lim: lim, rules: []grpclimit.Rule{ok, ok}, is: grpclimit.ErrInvalidRule},
		{name: "no key", lim: lim, rules: []grpclimit.Rule{with(func(r *grpclimit.Rule) { r.Key = nil })}, is: grpclimit.ErrInvalidRule},
		{name: "cost", lim: lim, rules: []grpclimit.Rule{with(func(r *grpclimit.Rule) { r.Cost = 5 })}, is: grpclimit.ErrInvalidRule},
		{name: "metadata", lim: lim, opts: grpclimit.Options{Metadata: 8}, rules: []grpclimit.Rule{ok}},
	}
	for _, tt := range tests {
		in, err := grpclimit.New(tt.lim, tt.opts, tt.rules...)
		if err == nil || in != nil {
			t.Errorf("%s: New = %v, %v; want an error", tt.name, in, err)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: %v, want errors.Is %v", tt.name, err, tt.is)
		}
	}
	if !errors.Is(grpclimit.ErrNoKey, httplimit.ErrNoKey) {
		t.Error("grpclimit.ErrNoKey is not httplimit.ErrNoKey")
	}
}
