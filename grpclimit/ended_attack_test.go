package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/grpclimit"
	"github.com/redlimit/redlimit/memory"
)

// brokenOnEnd is a limiter whose AllowAll fails with an error that is not
// the context's, as a store client does when the call's context ends
// while it waits (a closed connection).
type brokenOnEnd struct{ redlimit.Limiter }

func (brokenOnEnd) AllowAll(ctx context.Context, _ []redlimit.Request) (redlimit.Decision, error) {
	<-ctx.Done()
	return redlimit.Decision{}, errors.New("connection closed")
}

// endedStream is a server stream whose context is ctx.
type endedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s endedStream) Context() context.Context  { return s.ctx }
func (endedStream) SetHeader(metadata.MD) error { return nil }

// TestEndedCallNotServedUnlimited: a unary call or a stream whose context
// ends while the limiter decides is refused with its context's status,
// fail open or not, and its handler never runs, even when the limiter's
// error is not the context's.
func TestEndedCallNotServedUnlimited(t *testing.T) {
	t.Parallel()
	ms, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	for _, failClosed := range []bool{false, true} {
		log, _ := newLogger()
		in := mustNew(t, brokenOnEnd{ms}, grpclimit.Options{FailClosed: failClosed, Logger: log},
			grpclimit.Rule{Name: "ip", Limit: redlimit.PerSecond(1), Key: grpclimit.RemoteIP},
			grpclimit.Rule{Name: "dry", Limit: redlimit.PerSecond(1), Key: grpclimit.Method, Shadow: true})
		ctx, cancel := context.WithCancel(peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}))
		cancel()
		ran := 0
		_, err := in.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}, func(context.Context, any) (any, error) { ran++; return nil, nil })
		if status.Code(err) != codes.Canceled {
			t.Errorf("FailClosed %v: unary: %v, want Canceled", failClosed, err)
		}
		err = in.Stream()(nil, endedStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/a.B/D"}, func(any, grpc.ServerStream) error { ran++; return nil })
		if status.Code(err) != codes.Canceled {
			t.Errorf("FailClosed %v: stream: %v, want Canceled", failClosed, err)
		}
		if ran != 0 {
			t.Errorf("FailClosed %v: the handler ran %d times", failClosed, ran)
		}
	}
}
