package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
)

// boom panics for a call whose x-boom metadata is set, as a rule's
// function with a bug a client can reach does.
func boom(ctx context.Context) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-boom")) > 0 {
		panic("boom")
	}
}

// TestRuleFuncPanics: a rule's key, limit or cost function that panics on
// one call fails that call alone (InvalidArgument): the server goes on
// serving the other callers, and an in-flight slot taken before the
// panic is released.
func TestRuleFuncPanics(t *testing.T) {
	for _, st := range testStores(t, nil) {
		for _, where := range []string{"key", "limit", "cost", "held"} {
			t.Run(st.name+"/"+where, func(t *testing.T) {
				rate := grpclimit.Rule{Name: "rate", Key: grpclimit.Metadata("x-tenant"), Limit: redlimit.PerSecond(1000)}
				switch where {
				case "key":
					rate.Key = func(ctx context.Context, _ string) (string, error) {
						boom(ctx)
						return "k", nil
					}
				case "limit":
					rate.Limit = redlimit.Limit{}
					rate.LimitFunc = func(ctx context.Context, _ string, _ any) (redlimit.Limit, error) {
						boom(ctx)
						return redlimit.PerSecond(1000), nil
					}
				case "cost":
					rate.CostFunc = func(ctx context.Context, _ string, _ any) (int64, error) {
						boom(ctx)
						return 1, nil
					}
				}
				rules := []grpclimit.Rule{rate}
				if where == "held" {
					rules = append(rules,
						grpclimit.Rule{Name: "jobs", InFlight: redlimit.InFlight(1, time.Minute), Key: grpclimit.Metadata("x-tenant")},
						grpclimit.Rule{Name: "user", InFlight: redlimit.InFlight(1, time.Minute), Key: func(ctx context.Context, _ string) (string, error) {
							boom(ctx)
							return "u", nil
						}})
				}
				log, _ := newLogger()
				c, _ := serve(t, mustNew(t, st.lim, grpclimit.Options{Logger: log}, rules...))
				ctx := ctxTimeout(t)
				if code, _, _ := check(metadata.AppendToOutgoingContext(ctx, "x-boom", "1"), c, "a", ""); code != codes.InvalidArgument {
					t.Fatalf("the call that panics: %s, want InvalidArgument", code)
				}
				if code, _, err := check(ctx, c, "a", ""); code != codes.OK {
					t.Fatalf("another call, after: %s (%v), want OK", code, err)
				}
			})
		}
	}
}
