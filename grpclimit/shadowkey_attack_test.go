package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
)

// TestShadowRuleKeyErrorNotRefused: a shadow rule whose key function fails
// (an error that is not ErrNoKey) is a dry run like any other: it never
// refuses the call, and the enforced rules are decided as without it (the
// enforced rule of 1 call a minute still denies the second call).
func TestShadowRuleKeyErrorNotRefused(t *testing.T) {
	t.Parallel()
	for _, st := range testStores(t, fixedNow()) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			in := mustNew(t, st.lim, grpclimit.Options{Logger: log},
				grpclimit.Rule{Name: "method", Limit: redlimit.PerMinute(1), Key: grpclimit.Method},
				grpclimit.Rule{Name: "dry", Limit: redlimit.PerMinute(100), Shadow: true,
					Key: func(context.Context, string) (string, error) { return "", errors.New("no tenant header") }})
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
			info := &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}
			ran := 0
			h := func(context.Context, any) (any, error) { ran++; return nil, nil }
			if _, err := in.Unary()(ctx, nil, info, h); err != nil {
				t.Errorf("first call refused by a shadow rule's key error: %v", err)
			}
			if _, err := in.Unary()(ctx, nil, info, h); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("second call: %v, want ResourceExhausted from the enforced rule", err)
			}
			if ran != 1 {
				t.Errorf("the handler ran %d times, want 1", ran)
			}
		})
	}
}
